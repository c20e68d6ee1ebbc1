/**
 * The limiter's screens (domain/screening.ts): asked in order before any
 * rule, the first verdict decides; a refused request touches no counter, an
 * admitted one is counted by no rule; with no verdict the rules decide. The
 * screens here are plain functions of the request: access lists and bans,
 * the real screens, have their own tests.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { RequestScreen, Screening } from "../../../src/domain/screening.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";

const screenOf = (verdicts: Record<string, Screening>): RequestScreen => ({ screen: (request) => verdicts[request.userId ?? ""] ?? null });

describe("Limiter screens", () => {
  let clock: ManualClock;
  let book: RuleBook;
  let store: MemoryCounterStore;

  beforeEach(() => {
    clock = new ManualClock();
    store = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
    book = new RuleBook();
    book.load([makeRule({ scope: ["USER"], limit: 2 })]);
  });

  const limiterWith = (...screens: RequestScreen[]) => new Limiter(book, store, null, clock, { screens });
  const byUser = (userId: string) => makeCheckRequest({ userId, resource: null, method: null });

  const denied: Screening = { admit: false, reason: { code: "DENY_LISTED", message: "user u1 is on the deny list", until: null } };
  const admitted: Screening = { admit: true, reason: { code: "ALLOW_LISTED", message: "user u1 is on the allow list", until: null } };

  it("refuses from the first screen with a verdict, before any rule, and counts nothing", async () => {
    const limiter = limiterWith(screenOf({ u1: denied }), screenOf({ u1: admitted }));
    const [refused] = await limiter.check(BOOTSTRAP, [byUser("u1")]);
    expect(refused).toMatchObject({ allowed: false, source: "SCREENING", reason: denied.reason, rule: null, results: [], retryAfter: null, headers: [] });
    // The rule's bucket for u1 was not touched: a dry run of the first unit leaves the second.
    const [dryRun] = await limiterWith().check(BOOTSTRAP, [{ ...byUser("u1"), dryRun: true }]);
    expect(dryRun!.remaining).toBe(1);
  });

  it("admits an allow-listed request past a rule that would refuse it", async () => {
    const limiter = limiterWith(screenOf({ u1: admitted }));
    const decisions = await limiter.check(BOOTSTRAP, [byUser("u1"), byUser("u1"), byUser("u1")]);
    expect(decisions.map((d) => [d.allowed, d.reason?.code, d.results.length])).toEqual([
      [true, "ALLOW_LISTED", 0],
      [true, "ALLOW_LISTED", 0],
      [true, "ALLOW_LISTED", 0],
    ]);
  });

  it("says when a refusal with an end lifts, in retryAfter, retryAfterMs, resetAt and Retry-After", async () => {
    const until = new Date(clock.now() + 90_500);
    const banned: Screening = { admit: false, reason: { code: "BANNED", message: "user u1 is banned", until } };
    const [refused] = await limiterWith(screenOf({ u1: banned })).check(BOOTSTRAP, [byUser("u1")]);
    expect(refused).toMatchObject({ allowed: false, retryAfter: 91, retryAfterMs: 90_500, resetAt: until, headers: [{ name: "Retry-After", value: "91" }] });
  });

  it("has no wait to give for a refusal without an end (a deny list entry)", async () => {
    const [refused] = await limiterWith(screenOf({ u1: denied })).check(BOOTSTRAP, [byUser("u1")]);
    expect(refused).toMatchObject({ allowed: false, retryAfter: null, retryAfterMs: null, headers: [] });
  });

  it("leaves a request no screen has a verdict on to its rules", async () => {
    const [decided] = await limiterWith(screenOf({ u1: denied })).check(BOOTSTRAP, [byUser("u2")]);
    expect(decided).toMatchObject({ allowed: true, source: "COUNTER_STORE", reason: null, remaining: 1 });
  });

  it("screens every check of a joint request, and refuses it whole on any", async () => {
    const { decision, parts } = await limiterWith(screenOf({ u1: denied })).checkTogether(BOOTSTRAP, [byUser("u2"), byUser("u1")]);
    expect(decision.reason?.code).toBe("DENY_LISTED");
    expect(parts.map((p) => p.allowed)).toEqual([false, false]);
  });
});
