/** What the limiter publishes: throttle events for refusals, near-limit events for admissions that leave a bucket nearly spent. */

import { beforeEach, describe, expect, it } from "vitest";
import type { NearLimitEvent, ThrottleEvent } from "../../../src/domain/events.js";
import type { CheckRequest } from "../../../src/domain/request.js";
import type { Rule } from "../../../src/domain/rule.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";

const REQUEST = makeCheckRequest();

describe("the limiter's events", () => {
  let book: RuleBook;
  let limiter: Limiter;
  let throttles: ThrottleEvent[];
  let nearLimits: NearLimitEvent[];

  beforeEach(() => {
    const clock = new ManualClock();
    const events = new InProcessEventBus();
    throttles = [];
    nearLimits = [];
    events.subscribe("throttle", (e) => throttles.push(e));
    events.subscribe("nearLimit", (e) => nearLimits.push(e));
    book = new RuleBook();
    limiter = new Limiter(book, new MemoryCounterStore({ clock, sweepIntervalMs: 0 }), events, clock);
  });

  async function checks(count: number, request: CheckRequest = REQUEST) {
    const decisions = [];
    for (let i = 0; i < count; i++) decisions.push((await limiter.check(BOOTSTRAP, [request]))[0]!);
    return decisions;
  }

  function withRules(...rules: Rule[]): Rule[] {
    book.load(rules);
    return rules;
  }

  it("marks nearLimit once under 10% of the limit remains (limit 20: remaining 1 and 0), never on a refusal", async () => {
    withRules(makeRule({ scope: ["USER"], limit: 20 }));
    const decisions = await checks(21);
    expect(decisions.map((d) => d.remaining)).toEqual([...Array.from({ length: 20 }, (_, i) => 19 - i), 0]);
    expect(decisions.flatMap((d, i) => (d.nearLimit ? [i + 1] : []))).toEqual([19, 20]);
    expect(decisions[20]).toMatchObject({ allowed: false, nearLimit: false });
  });

  it("marks the decision nearLimit when any enforcing rule is near its limit, even one that does not decide", async () => {
    const [shared, perUser] = withRules(makeRule({ scope: [], limit: 1000 }), makeRule({ scope: ["USER"], limit: 60, method: "POST" }));
    await limiter.check(BOOTSTRAP, [{ ...REQUEST, method: "GET", cost: 900 }]);
    const [decision] = await checks(1, { ...REQUEST, cost: 50 });
    // The per-user rule decides (10 left, not under 6); the shared one has 50 of 1000 left, under 10%.
    expect(decision).toMatchObject({ allowed: true, rule: { id: perUser!.id }, remaining: 10, nearLimit: true });
    expect(decision!.results.map((r) => [r.rule.id, r.nearLimit])).toEqual([
      [perUser!.id, false],
      [shared!.id, true],
    ]);
  });

  it("never marks the decision nearLimit for a shadow rule, which clients do not see", async () => {
    withRules(makeRule({ scope: ["USER"], limit: 100 }), makeRule({ scope: ["USER"], limit: 1, action: "LOG_ONLY" }));
    const [decision] = await checks(1);
    expect(decision!.results.map((r) => [r.rule.action, r.nearLimit])).toEqual([
      ["LOG_ONLY", true],
      ["REJECT", false],
    ]);
    expect(decision!.nearLimit).toBe(false);
  });

  it("publishes a near-limit event for each admission that leaves the bucket nearly spent, and a throttle event for the refusal", async () => {
    const [rule] = withRules(makeRule({ scope: ["USER"], limit: 20, name: "per-user" }));
    await checks(21);
    expect(nearLimits.map((e) => [e.remaining, e.count, e.shadow])).toEqual([
      [1, 1, false],
      [0, 1, false],
    ]);
    expect(nearLimits[0]).toMatchObject({ tenantId: "acme", ruleId: rule!.id, ruleName: "per-user", key: "user:u1", resource: "/api/orders", method: "POST", limit: 20 });
    expect(throttles).toHaveLength(1);
    expect(throttles[0]).toMatchObject({ ruleId: rule!.id, key: "user:u1", shadow: false, count: 1, limit: 20 });
  });

  it("publishes shadow events for a LOG_ONLY rule, whose refusals let the request through", async () => {
    withRules(makeRule({ scope: ["USER"], limit: 1, action: "LOG_ONLY" }));
    const decisions = await checks(2);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true]);
    expect(nearLimits.map((e) => e.shadow)).toEqual([true]);
    expect(throttles.map((e) => [e.shadow, e.action])).toEqual([[true, "LOG_ONLY"]]);
  });

  it("publishes no near-limit event when another rule refuses the request, since nothing went through", async () => {
    const [, strict] = withRules(makeRule({ scope: ["USER"], limit: 10 }), makeRule({ scope: ["USER"], limit: 1 }));
    await checks(1);
    nearLimits.length = 0;
    const [refused] = await checks(1);
    expect(refused!.allowed).toBe(false);
    expect(throttles.map((e) => e.ruleId)).toEqual([strict!.id]);
    expect(nearLimits).toEqual([]);
  });

  it("publishes nothing for a dry run", async () => {
    withRules(makeRule({ scope: ["USER"], limit: 1 }));
    await checks(3, { ...REQUEST, dryRun: true });
    await checks(1);
    expect(nearLimits).toHaveLength(1);
    expect(throttles).toEqual([]);
  });
});
