/**
 * Limiter.checkTogether: several checks of one request (an Envoy request's
 * descriptors) decided as one atomic call, on the in-process store with a
 * pinned clock. The request is allowed only if every check is; a refused
 * request takes nothing from any bucket; a bucket two checks share counts the
 * request once; each part reports its own rules, in the checks' order.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../../../src/domain/events.js";
import type { Rule } from "../../../src/domain/rule.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";

describe("Limiter.checkTogether", () => {
  let book: RuleBook;
  let limiter: Limiter;
  let throttles: ThrottleEvent[];

  beforeEach(() => {
    const clock = new ManualClock();
    const events = new InProcessEventBus();
    throttles = [];
    events.subscribe("throttle", (e) => throttles.push(e));
    book = new RuleBook();
    limiter = new Limiter(book, new MemoryCounterStore({ clock, sweepIntervalMs: 0 }), events, clock);
  });

  function withRules(...rules: Rule[]): Rule[] {
    book.load(rules);
    return rules;
  }

  const byUser = (userId: string) => makeCheckRequest({ userId, resource: null, method: null });
  const byPath = (resource: string) => makeCheckRequest({ userId: null, resource, method: null });

  it("reports each check's own rules in order, and refuses the request whole when one check is over its limit", async () => {
    const [perUser, search] = withRules(makeRule({ scope: ["USER"], limit: 1 }), makeRule({ resource: "/search", limit: 5 }));
    const first = await limiter.checkTogether(BOOTSTRAP, [byUser("u1"), byPath("/search")]);
    expect(first.decision.allowed).toBe(true);
    expect(first.parts.map((p) => [p.rule?.id, p.remaining])).toEqual([
      [perUser!.id, 0],
      [search!.id, 4],
    ]);

    const refused = await limiter.checkTogether(BOOTSTRAP, [byUser("u1"), byPath("/search")]);
    expect(refused.decision).toMatchObject({ allowed: false, rule: { id: perUser!.id } });
    expect(refused.parts.map((p) => [p.results.map((r) => r.allowed), p.remaining])).toEqual([
      [[false], 0],
      [[true], 4],
    ]);
    expect(throttles.map((e) => e.ruleId)).toEqual([perUser!.id]);

    // Nothing was taken from the search rule by the refused request: this check takes the second unit.
    const [alone] = await limiter.check(BOOTSTRAP, [byPath("/search")]);
    expect(alone!.remaining).toBe(3);
  });

  it("skips CONCURRENCY rules, which nothing could release (Envoy's protocol never says a request ended), and hands out no lease", async () => {
    const [perUser] = withRules(makeRule({ scope: ["USER"], limit: 5 }), makeRule({ scope: ["USER"], algorithm: "CONCURRENCY", limit: 1 }));
    for (let i = 0; i < 3; i++) {
      const { decision, parts } = await limiter.checkTogether(BOOTSTRAP, [byUser("u1")]);
      expect(decision.allowed).toBe(true);
      expect(decision.lease).toBeUndefined();
      expect(parts[0]!.results.map((r) => r.rule.id)).toEqual([perUser!.id]);
    }
    // The same rule holds a single check's lease.
    const [single] = await limiter.check(BOOTSTRAP, [byUser("u1")]);
    expect(single!.lease).toBeDefined();
    expect((await limiter.check(BOOTSTRAP, [byUser("u1")]))[0]!.allowed).toBe(false);
  });

  it("counts the request once against a bucket two of its checks share", async () => {
    const [tenantWide] = withRules(makeRule({ limit: 3 }));
    const { parts } = await limiter.checkTogether(BOOTSTRAP, [byUser("u1"), byUser("u2")]);
    expect(parts.map((p) => [p.rule?.id, p.remaining])).toEqual([
      [tenantWide!.id, 2],
      [tenantWide!.id, 2],
    ]);
  });

  it("gives a check no rule applies to a part of its own without a rule, allowed as the request is", async () => {
    withRules(makeRule({ scope: ["USER"], limit: 1 }));
    await limiter.checkTogether(BOOTSTRAP, [byUser("u1")]);
    const { decision, parts } = await limiter.checkTogether(BOOTSTRAP, [byPath("/elsewhere"), byUser("u1")]);
    expect(decision.allowed).toBe(false);
    expect(parts[0]).toMatchObject({ allowed: false, rule: null, results: [] });
    expect(parts[1]!.results.map((r) => r.allowed)).toEqual([false]);
  });

  it("decides a request no rule applies to at all as allowed, with one empty part per check", async () => {
    const { decision, parts } = await limiter.checkTogether(BOOTSTRAP, [byUser("u1"), byPath("/x")]);
    expect(decision).toMatchObject({ allowed: true, rule: null });
    expect(parts).toHaveLength(2);
    for (const part of parts) expect(part).toMatchObject({ allowed: true, rule: null, results: [] });
  });
});
