/** Which rule decides a request several rules apply to: the ranking the server's limiter and the client's LOCAL mode share. */

import { describe, expect, it } from "vitest";
import { mostRestrictiveFirst, rank, type Rankable } from "../../src/domain/most-restrictive.js";
import type { Action } from "../../src/domain/rule.js";

interface Given {
  id: string;
  allowed?: boolean;
  action?: Action;
  retryAfterMs?: number | null;
  remaining?: number;
  priority?: number;
  consulted?: boolean;
}

function result({ id, allowed = false, action = "REJECT", retryAfterMs = allowed ? null : 1000, remaining = 0, priority = 0, consulted = true }: Given): Rankable {
  return { result: { allowed, remaining, consulted, rule: { id, priority, action } }, retryAfterMs };
}

const rankOf = (given: Given[]) => rank(given.map(result));
const idsOf = (results: readonly Rankable[]) => results.map(({ result }) => result.rule.id);

/** Every order of the results: the ranking must not depend on the order the rules were matched in. */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}

describe("mostRestrictiveFirst", () => {
  it.each<[string, Given[], string[]]>([
    [
      "an enforcing refusal before a shadow refusal before an admission, whatever their waits and remaining",
      [
        { id: "admits", allowed: true, remaining: 0 },
        { id: "shadow", action: "LOG_ONLY", retryAfterMs: 60_000 },
        { id: "refuses", retryAfterMs: 10, remaining: 5 },
      ],
      ["refuses", "shadow", "admits"],
    ],
    [
      "a THROTTLE refusal ranks as an enforcing one",
      [
        { id: "shadow", action: "LOG_ONLY" },
        { id: "throttles", action: "THROTTLE" },
      ],
      ["throttles", "shadow"],
    ],
    [
      "among refusals, the longest wait first (to the millisecond)",
      [
        { id: "short", retryAfterMs: 1000 },
        { id: "long", retryAfterMs: 1001 },
      ],
      ["long", "short"],
    ],
    [
      "at equal waits, the fewest remaining first",
      [
        { id: "more", allowed: true, remaining: 3 },
        { id: "fewer", allowed: true, remaining: 2 },
      ],
      ["fewer", "more"],
    ],
    [
      "at equal remaining, the higher priority first",
      [
        { id: "low", allowed: true, remaining: 2, priority: 1 },
        { id: "high", allowed: true, remaining: 2, priority: 5 },
      ],
      ["high", "low"],
    ],
    [
      "at equal priority, the rule id",
      [
        { id: "r2", allowed: true },
        { id: "r10", allowed: true },
        { id: "r1", allowed: true },
      ],
      ["r1", "r10", "r2"],
    ],
  ])("ranks %s", (_what, given, expected) => {
    for (const order of permutations(given.map(result))) expect(idsOf([...order].sort(mostRestrictiveFirst))).toEqual(expected);
  });
});

describe("rank", () => {
  it("lets the most restrictive enforcing result decide, and lists the enforcing ones in rank order", () => {
    const { ranked, enforcing, deciding } = rankOf([
      { id: "admits", allowed: true, remaining: 4 },
      { id: "shadow", action: "LOG_ONLY", retryAfterMs: 60_000 },
      { id: "refuses", retryAfterMs: 500 },
      { id: "tight", allowed: true, remaining: 1 },
    ]);
    expect(idsOf(ranked)).toEqual(["refuses", "shadow", "tight", "admits"]);
    expect(idsOf(enforcing)).toEqual(["refuses", "tight", "admits"]);
    expect(deciding.result.rule.id).toBe("refuses");
  });

  it("passes over a bucket that was not read (refused from the over-limit cache, without the store) for the deciding result", () => {
    const { ranked, enforcing, deciding } = rankOf([
      { id: "unread", allowed: true, remaining: 0, consulted: false },
      { id: "read", allowed: true, remaining: 3 },
    ]);
    expect(idsOf(ranked)).toEqual(["unread", "read"]);
    expect(idsOf(enforcing)).toEqual(["read"]);
    expect(deciding.result.rule.id).toBe("read");
  });

  it("lets the most restrictive shadow result decide when only shadow rules apply", () => {
    const { enforcing, deciding } = rankOf([
      { id: "shadow-admits", action: "LOG_ONLY", allowed: true, remaining: 9 },
      { id: "shadow-refuses", action: "LOG_ONLY" },
    ]);
    expect(enforcing).toEqual([]);
    expect(deciding.result.rule.id).toBe("shadow-refuses");
  });

  it("leaves the results it was given in their order", () => {
    const given = [{ id: "b", allowed: true }, { id: "a" }].map(result);
    rank(given);
    expect(idsOf(given)).toEqual(["b", "a"]);
  });
});
