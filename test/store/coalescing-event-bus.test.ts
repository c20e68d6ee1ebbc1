/**
 * Coalescing of throttle and near-limit events, with intervals ended by hand
 * (flush) so that every count is exact and nothing depends on timing; and the
 * flood: 50,000 denials through the limiter itself.
 */

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { NearLimitEvent, RuleChange, ThrottleEvent } from "../../src/domain/events.js";
import type { Rule } from "../../src/domain/rule.js";
import { systemClock } from "../../src/domain/ports.js";
import { CoalescingEventBus, OTHER_KEYS } from "../../src/store/coalescing-event-bus.js";
import { BOOTSTRAP } from "../../src/engine/access/api-key-service.js";
import { Limiter } from "../../src/engine/decision/limiter.js";
import { RuleBook } from "../../src/engine/decision/rule-book.js";
import { InProcessEventBus } from "../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { makeCheckRequest, makeRule } from "../support/domain-factory.js";

function throttle(fields: Partial<ThrottleEvent> = {}): ThrottleEvent {
  return {
    at: new Date(0),
    tenantId: "acme",
    ruleId: "r1",
    ruleName: "per-user",
    key: "user:u1",
    resource: "/api",
    method: "GET",
    action: "REJECT",
    limit: 5,
    retryAfter: 10,
    shadow: false,
    count: 1,
    ...fields,
  };
}

function nearLimit(fields: Partial<NearLimitEvent> = {}): NearLimitEvent {
  const { retryAfter: _retryAfter, ...base } = throttle();
  return { ...base, remaining: 0, ...fields };
}

/** The events one bus publishes, as the bus behind it receives them. */
function collect(inner: InProcessEventBus) {
  const throttles: ThrottleEvent[] = [];
  const nearLimits: NearLimitEvent[] = [];
  inner.subscribe("throttle", (e) => throttles.push(e));
  inner.subscribe("nearLimit", (e) => nearLimits.push(e));
  return { throttles, nearLimits };
}

const total = (events: readonly { count: number }[]) => events.reduce((sum, e) => sum + e.count, 0);

describe("CoalescingEventBus", () => {
  let inner: InProcessEventBus;
  let bus: CoalescingEventBus;
  let seen: ReturnType<typeof collect>;

  beforeEach(() => {
    inner = new InProcessEventBus();
    bus = new CoalescingEventBus(inner, { intervalMs: 0, maxKeys: 4 });
    seen = collect(inner);
  });

  afterEach(async () => {
    await bus.close();
  });

  it("publishes a bucket's first event at once, and the ones after it as one event with their count when the interval ends", () => {
    bus.publish("throttle", throttle({ retryAfter: 10 }));
    expect(seen.throttles).toEqual([throttle({ retryAfter: 10 })]);
    bus.publish("throttle", throttle({ retryAfter: 9 }));
    bus.publish("throttle", throttle({ retryAfter: 8, at: new Date(5) }));
    expect(seen.throttles).toHaveLength(1);
    bus.flush();
    expect(seen.throttles).toEqual([throttle({ retryAfter: 10 }), throttle({ retryAfter: 8, at: new Date(5), count: 2 })]);
  });

  it("under a steady flood on one bucket publishes one event per interval, and the counts add up exactly", () => {
    for (let interval = 0; interval < 4; interval++) {
      for (let i = 0; i < 1000; i++) bus.publish("throttle", throttle());
      bus.flush();
    }
    expect(seen.throttles.map((e) => e.count)).toEqual([1, 999, 1000, 1000, 1000]);
    expect(total(seen.throttles)).toBe(4000);
  });

  it("forgets a bucket quiet for a whole interval, so its next event goes out at once again", () => {
    bus.publish("throttle", throttle());
    bus.flush();
    bus.flush();
    bus.publish("throttle", throttle());
    expect(seen.throttles.map((e) => e.count)).toEqual([1, 1]);
  });

  it("keeps buckets, rules and shadow events apart", () => {
    const kinds = [throttle(), throttle({ key: "user:u2" }), throttle({ ruleId: "r2" }), throttle({ shadow: true, action: "LOG_ONLY" })];
    for (const event of kinds) for (let i = 0; i < 3; i++) bus.publish("throttle", event);
    bus.flush();
    expect(seen.throttles).toEqual([...kinds, ...kinds.map((e) => ({ ...e, count: 2 }))]);
  });

  it("gathers the events of buckets beyond maxKeys per rule under OTHER_KEYS, still counting every one", () => {
    for (let user = 1; user <= 10; user++) for (let i = 0; i < 5; i++) bus.publish("throttle", throttle({ key: `user:u${user}` }));
    expect(seen.throttles.map((e) => [e.key, e.count])).toEqual([
      ["user:u1", 1],
      ["user:u2", 1],
      ["user:u3", 1],
      ["user:u4", 1],
      [OTHER_KEYS, 1],
    ]);
    bus.flush();
    expect(seen.throttles.slice(5).map((e) => [e.key, e.count])).toEqual([
      ["user:u1", 4],
      ["user:u2", 4],
      ["user:u3", 4],
      ["user:u4", 4],
      [OTHER_KEYS, 29],
    ]);
    expect(total(seen.throttles)).toBe(50);
  });

  it("coalesces near-limit events alike, apart from throttle events", () => {
    for (let i = 0; i < 3; i++) {
      bus.publish("nearLimit", nearLimit({ remaining: 2 - i }));
      bus.publish("throttle", throttle());
    }
    bus.flush();
    expect(seen.nearLimits).toEqual([nearLimit({ remaining: 2 }), nearLimit({ remaining: 0, count: 2 })]);
    expect(seen.throttles.map((e) => e.count)).toEqual([1, 2]);
  });

  it("publishes what is still counted when it closes", async () => {
    bus.publish("throttle", throttle());
    bus.publish("throttle", throttle());
    await bus.close();
    expect(seen.throttles.map((e) => e.count)).toEqual([1, 1]);
  });

  it("passes rule changes and listeners straight through", async () => {
    const change: RuleChange = { kind: "DELETED", ruleId: "r1", tenantId: "acme", version: 2, rule: null, at: new Date(0) };
    const heard: RuleChange[] = [];
    bus.subscribe("ruleChange", (c) => heard.push(c));
    await bus.publish("ruleChange", change);
    expect(heard).toEqual([change]);
  });
});

describe('two tenants under one rule of tenant "*", through the limiter', () => {
  async function denials(scope: Rule["scope"], maxKeys: number, traffic: [tenantId: string, userId: string, checks: number][]) {
    const inner = new InProcessEventBus();
    const bus = new CoalescingEventBus(inner, { intervalMs: 0, maxKeys });
    const seen = collect(inner);
    const book = new RuleBook();
    book.load([makeRule({ tenantId: "*", scope, limit: 1, window: 1, windowUnit: "DAYS" })]);
    const limiter = new Limiter(book, new MemoryCounterStore({ clock: new ManualClock(), sweepIntervalMs: 0 }), bus, systemClock);
    const denied = new Map<string, number>();
    for (const [tenantId, userId, checks] of traffic) {
      for (let i = 0; i < checks; i++) {
        const [decision] = await limiter.check(BOOTSTRAP, [makeCheckRequest({ tenantId, userId })]);
        if (!decision!.allowed) denied.set(tenantId, (denied.get(tenantId) ?? 0) + 1);
      }
    }
    await bus.close();
    return { denied, seen: seen.throttles };
  }

  const countsOf = (events: readonly ThrottleEvent[], tenantId: string) => total(events.filter((e) => e.tenantId === tenantId));

  it("never adds one tenant's denials to another's event when they share the rule's single bucket", async () => {
    // P spends the shared bucket, then P is refused 4 times and Q 3 times.
    const { denied, seen } = await denials([], 10, [
      ["p", "u1", 5],
      ["q", "u1", 3],
    ]);
    expect(Object.fromEntries(denied)).toEqual({ p: 4, q: 3 });
    expect(seen.map((e) => [e.tenantId, e.key, e.count])).toEqual([
      ["p", "*", 1],
      ["q", "*", 1],
      ["p", "*", 3],
      ["q", "*", 2],
    ]);
  });

  it("gathers overflowing buckets under OTHER_KEYS per tenant", async () => {
    // Two buckets are tracked one by one (p's u0, q's u1); every later bucket overflows.
    const { denied, seen } = await denials(["USER"], 2, [
      ["p", "u0", 2],
      ["q", "u1", 2],
      ["p", "u2", 4],
      ["q", "u3", 3],
      ["p", "u4", 2],
    ]);
    expect(Object.fromEntries(denied)).toEqual({ p: 1 + 3 + 1, q: 1 + 2 });
    expect(seen.filter((e) => e.key === OTHER_KEYS).map((e) => [e.tenantId, e.count])).toEqual([
      ["p", 1],
      ["q", 1],
      ["p", 3],
      ["q", 1],
    ]);
    expect(countsOf(seen, "p")).toBe(5);
    expect(countsOf(seen, "q")).toBe(3);
  });

  it("beyond maxKeys groups of overflowing buckets, publishes events on their own rather than mix tenants", async () => {
    const { denied, seen } = await denials(["USER"], 1, [
      ["p", "u0", 2],
      ["q", "u1", 2],
      ["r", "u2", 3],
    ]);
    expect(Object.fromEntries(denied)).toEqual({ p: 1, q: 1, r: 2 });
    expect(seen.map((e) => [e.tenantId, e.key, e.count])).toEqual([
      ["p", "tenant:p|user:u0", 1],
      ["q", OTHER_KEYS, 1],
      ["r", "tenant:r|user:u2", 1],
      ["r", "tenant:r|user:u2", 1],
    ]);
  });
});

describe("a flood of 50,000 denials on one bucket, through the limiter", () => {
  it("publishes a bounded number of throttle events whose counts add up to exactly 50,000", async () => {
    const clock = new ManualClock();
    const store = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
    const inner = new InProcessEventBus();
    const bus = new CoalescingEventBus(inner, { intervalMs: 0, maxKeys: 10_000 });
    const seen = collect(inner);
    const book = new RuleBook();
    const rule = makeRule({ tenantId: "acme", scope: ["USER"], limit: 1, window: 1, windowUnit: "DAYS" });
    book.load([rule]);
    const limiter = new Limiter(book, store, bus, systemClock);
    const request = makeCheckRequest();

    const [first] = await limiter.check(BOOTSTRAP, [request]);
    expect(first!.allowed).toBe(true);
    // Ten intervals of 5,000 denials each, checked 1,000 to a call.
    let denied = 0;
    for (let interval = 0; interval < 10; interval++) {
      for (let call = 0; call < 5; call++) {
        const decisions = await limiter.check(BOOTSTRAP, Array.from({ length: 1000 }, () => request));
        denied += decisions.filter((d) => !d.allowed).length;
        clock.advance(100);
      }
      bus.flush();
    }

    expect(denied).toBe(50_000);
    expect(seen.throttles).toHaveLength(11);
    expect(seen.throttles.map((e) => e.count)).toEqual([1, 4999, 5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000, 5000]);
    expect(total(seen.throttles)).toBe(50_000);
    expect(seen.throttles.every((e) => e.ruleId === rule.id && e.key === "user:u1" && !e.shadow)).toBe(true);
    console.log(`flood through the limiter: ${denied} denials -> ${seen.throttles.length} throttle events, counts summing to ${total(seen.throttles)}`);
    await bus.close();
    await store.close();
  });
});
