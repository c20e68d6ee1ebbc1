/**
 * The over-limit cache in the limiter, on the in-process store and on real
 * Redis with a pinned clock: it refuses only what the store would refuse,
 * never admits, consumes nothing, lists every rule, expires exactly when the
 * store would admit again, and forgets on rule changes and resets.
 */

import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Decision } from "../../../src/domain/decision.js";
import type { RuleChange } from "../../../src/domain/events.js";
import type { CounterStore } from "../../../src/domain/ports.js";
import type { CheckRequest } from "../../../src/domain/request.js";
import { ALGORITHMS, type Rule } from "../../../src/domain/rule.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { OverLimitCache } from "../../../src/engine/decision/over-limit-cache.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { RuleService } from "../../../src/engine/rules/rule-service.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";
import { InMemoryRuleRepository } from "../../support/in-memory-rule-repository.js";
import { CountingCounterStore } from "../../support/ports.js";
import { testRedis } from "../../support/redis.js";
import { redisAvailable } from "../../support/services.js";
import { listenToEvents } from "../../../src/event-listeners.js";

type StoreFactory = (clock: ManualClock) => { store: CounterStore; cleanup(): Promise<void> };

const STORES: [string, StoreFactory, boolean][] = [
  ["memory", (clock) => ({ store: new MemoryCounterStore({ clock, sweepIntervalMs: 0 }), cleanup: async () => {} }), true],
  [
    "redis",
    (clock) => {
      const { redis, prefix, cleanup } = testRedis();
      return { store: new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 64), clock }), cleanup };
    },
    await redisAvailable(),
  ],
];

function request(fields: Partial<CheckRequest> = {}): CheckRequest {
  return makeCheckRequest({ ip: "10.0.0.1", ...fields });
}

for (const [name, makeStore, available] of STORES) {
  describe.runIf(available)(`over-limit cache (${name})`, () => {
    let clock: ManualClock;
    let counting: CountingCounterStore;
    let cleanup: () => Promise<void>;
    let book: RuleBook;
    let cache: OverLimitCache;
    let limiter: Limiter;
    let events: InProcessEventBus;

    beforeEach(() => {
      clock = new ManualClock();
      const made = makeStore(clock);
      counting = new CountingCounterStore(made.store);
      cleanup = made.cleanup;
      book = new RuleBook();
      cache = new OverLimitCache(1000);
      events = new InProcessEventBus();
      limiter = new Limiter(book, counting, events, clock, { overLimit: cache });
    });

    afterEach(() => cleanup());

    function load(...rules: Rule[]): void {
      book.load(rules);
    }

    async function check(fields: Partial<CheckRequest> = {}): Promise<Decision> {
      return (await limiter.check(BOOTSTRAP, [request(fields)]))[0]!;
    }

    /** The store's own answer for u1 now, as a dry run past the cache. */
    async function storeWouldAdmit(): Promise<boolean> {
      const [reply] = await counting.decide([{ buckets: [{ ...bucketOf(book), key: "user:u1" }], cost: 1, dryRun: true }]);
      return reply!.allowed;
    }

    /** Checks, and says whether the store was asked. */
    async function checkAndWatch(fields: Partial<CheckRequest> = {}): Promise<{ decision: Decision; askedStore: boolean }> {
      const before = counting.decideSizes.length;
      const decision = await check(fields);
      return { decision, askedStore: counting.decideSizes.length > before };
    }

    async function exhaust(times: number, fields: Partial<CheckRequest> = {}): Promise<Decision> {
      for (let i = 0; i < times; i++) expect((await check(fields)).allowed).toBe(true);
      const refused = await check(fields);
      expect(refused.allowed).toBe(false);
      expect(refused.source).toBe("COUNTER_STORE");
      return refused;
    }

    it("refuses a bucket the store refused, without the store, with the store's answer", async () => {
      const perUser = makeRule({ scope: ["USER"], limit: 2 });
      load(perUser);
      const fromStore = await exhaust(2);
      const { decision, askedStore } = await checkAndWatch();
      expect(askedStore).toBe(false);
      expect(decision).toMatchObject({ allowed: false, source: "OVER_LIMIT_CACHE", rule: perUser, remaining: 0, retryAfter: fromStore.retryAfter });
      expect(decision.results).toEqual([{ ...fromStore.results[0]!, consulted: true }]);
      expect(decision.headers.find((h) => h.name === "Retry-After")?.value).toBe(String(fromStore.retryAfter));
    });

    it("never admits: buckets it has not seen refused go to the store", async () => {
      load(makeRule({ scope: ["USER"], limit: 1 }));
      await exhaust(1);
      const { decision, askedStore } = await checkAndWatch({ userId: "u2" });
      expect(askedStore).toBe(true);
      expect(decision).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    });

    it("lists every rule that applied, the ones it did not read with consulted false, and leaves them out of RateLimit, not of RateLimit-Policy", async () => {
      const perUser = makeRule({ name: "per-user", scope: ["USER"], limit: 1 });
      const perIp = makeRule({ name: "per-ip", scope: ["IP"], limit: 100 });
      load(perUser, perIp);
      await exhaust(1);
      const { decision, askedStore } = await checkAndWatch();
      expect(askedStore).toBe(false);
      expect(decision.results.map((r) => [r.rule.id, r.allowed, r.consulted, r.remaining, r.retryAfter])).toEqual([
        [perUser.id, false, true, 0, decision.retryAfter],
        [perIp.id, true, false, 100, null],
      ]);
      expect(decision.results[1]!.resetAt).toEqual(decision.decidedAt);
      expect(decision.headers.find((h) => h.name === "RateLimit")?.value).toMatch(/^"per-user";r=0;t=\d+;pk=:[A-Za-z0-9+/=]+:$/);
      // The policy a client is shown stays the same whichever path answers: the store's (a dry run asks it) names both rules too.
      const policy = (d: Decision) => d.headers.find((h) => h.name === "RateLimit-Policy")?.value;
      expect(policy(decision)).toMatch(/^"per-user";q=1;w=60;pk=:[A-Za-z0-9+/=]+:, "per-ip";q=100;w=60;pk=:[A-Za-z0-9+/=]+:$/);
      expect(policy(decision)).toBe(policy(await check({ dryRun: true })));
    });

    it("consumes nothing when it refuses: the other rules' buckets are untouched", async () => {
      load(makeRule({ scope: ["USER"], limit: 1 }), makeRule({ scope: ["IP"], limit: 100 }));
      await exhaust(1);
      for (let i = 0; i < 5; i++) expect((await check()).source).toBe("OVER_LIMIT_CACHE");
      const probe = await check({ userId: "u2", dryRun: true });
      expect(probe.results.find((r) => r.key === "ip:10.0.0.1")!.remaining).toBe(98);
    });

    it("publishes a throttle event for each refusal it makes", async () => {
      load(makeRule({ scope: ["USER"], limit: 1 }));
      await exhaust(1);
      const seen: string[] = [];
      events.subscribe("throttle", (event) => seen.push(event.key));
      await check();
      expect(seen).toEqual(["user:u1"]);
    });

    // CONCURRENCY is never cached: its own cases below.
    for (const algorithm of ALGORITHMS.filter((a) => a !== "CONCURRENCY")) {
      it(`${algorithm}: refuses locally until the store would admit again, and not a millisecond longer`, async () => {
        load(makeRule({ scope: ["USER"], algorithm, limit: 3, window: 10 }));
        clock.advance(1234);
        await exhaust(3);
        const retryAfterMs = cache.refusal({ ...bucketOf(book), key: "user:u1" }, 1, clock.now())!.outcome.retryAfterMs!;
        clock.advance(retryAfterMs - 1);
        expect(await storeWouldAdmit()).toBe(false);
        expect(await checkAndWatch()).toMatchObject({ askedStore: false, decision: { allowed: false, retryAfter: 1 } });
        clock.advance(1);
        expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true, source: "COUNTER_STORE" } });
      });
    }

    it("THROTTLE: refuses locally only once the line is full, until it has room again", async () => {
      load(makeRule({ scope: ["USER"], algorithm: "FIXED_WINDOW", action: "THROTTLE", limit: 2, window: 10 }));
      for (let i = 0; i < 4; i++) expect((await check()).allowed).toBe(true);
      expect((await checkAndWatch()).decision).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
      const retryAfterMs = cache.refusal({ ...bucketOf(book), key: "user:u1" }, 1, clock.now())!.outcome.retryAfterMs!;
      expect((await checkAndWatch()).askedStore).toBe(false);
      clock.advance(retryAfterMs - 1);
      expect(await storeWouldAdmit()).toBe(false);
      clock.advance(1);
      expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true } });
    });

    it("a refusal for a cost refuses larger costs, but a smaller cost goes to the store", async () => {
      load(makeRule({ scope: ["USER"], limit: 5 }));
      expect((await check({ cost: 3 })).allowed).toBe(true);
      expect((await check({ cost: 3 })).allowed).toBe(false);
      expect(await checkAndWatch({ cost: 4 })).toMatchObject({ askedStore: false, decision: { allowed: false } });
      expect(await checkAndWatch({ cost: 2 })).toMatchObject({ askedStore: true, decision: { allowed: true, remaining: 0 } });
    });

    it("raising the limit takes effect at once", async () => {
      const rule = makeRule({ scope: ["USER"], limit: 2 });
      load(rule);
      await exhaust(2);
      expect((await check()).source).toBe("OVER_LIMIT_CACHE");
      book.apply(ruleChange(changed(rule, { limit: 5 })));
      expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true, remaining: 2 } });
    });

    for (const change of [{ window: 120 }, { algorithm: "TOKEN_BUCKET" }, { action: "THROTTLE" }, { burst: 3 }] as Partial<Rule>[]) {
      it(`a change of the rule's parameters (${JSON.stringify(change)}) sends the next check to the store`, async () => {
        const rule = makeRule({ scope: ["USER"], algorithm: "LEAKY_BUCKET", limit: 1 });
        load(rule);
        await exhaust(1);
        expect((await check()).source).toBe("OVER_LIMIT_CACHE");
        book.apply(ruleChange(changed(rule, change)));
        expect((await checkAndWatch()).askedStore).toBe(true);
      });
    }

    it("a change that leaves the parameters alone (a new name) keeps refusing locally", async () => {
      const rule = makeRule({ scope: ["USER"], limit: 1 });
      load(rule);
      await exhaust(1);
      book.apply(ruleChange(changed(rule, { name: "renamed" })));
      expect(await checkAndWatch()).toMatchObject({ askedStore: false, decision: { allowed: false, source: "OVER_LIMIT_CACHE" } });
    });

    it("never caches LOG_ONLY refusals: shadow rules never refuse", async () => {
      load(makeRule({ scope: ["USER"], limit: 1, action: "LOG_ONLY" }));
      await check();
      for (let i = 0; i < 3; i++) expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true } });
    });

    it("never caches CONCURRENCY refusals: a release ends them, long before the soonest lease expires", async () => {
      load(makeRule({ scope: ["USER"], algorithm: "CONCURRENCY", limit: 1 }));
      const held = await check();
      for (let i = 0; i < 3; i++) expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: false, source: "COUNTER_STORE" } });
      expect(cache.size).toBe(0);
      expect(await limiter.releaseLease(BOOTSTRAP, held.lease!.id)).toBe(true);
      expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true } });
    });

    it("refuses from the cache on another rule's account without taking a lease", async () => {
      load(makeRule({ scope: ["USER"], limit: 1 }), makeRule({ scope: ["USER"], algorithm: "CONCURRENCY", limit: 1, name: "in flight" }));
      const admitted = await check();
      expect(await limiter.releaseLease(BOOTSTRAP, admitted.lease!.id)).toBe(true);
      await check(); // refused by the per-user rule: the cache learns it
      const cached = await checkAndWatch();
      expect(cached).toMatchObject({ askedStore: false, decision: { allowed: false, source: "OVER_LIMIT_CACHE" } });
      expect(cached.decision.lease).toBeUndefined();
    });

    it("resetLimit forgets the bucket: the next check goes to the store and is admitted", async () => {
      const rule = makeRule({ scope: ["USER"], limit: 1 });
      load(rule);
      const service = new RuleService(new InMemoryRuleRepository(), book, counting, events, clock);
      listenToEvents(events, { overLimit: cache });
      await exhaust(1);
      await service.resetLimit(BOOTSTRAP, rule.id, "user:u1");
      expect(await checkAndWatch()).toMatchObject({ askedStore: true, decision: { allowed: true } });
    });
  });
}

describe("OverLimitCache", () => {
  const params = { algorithm: "FIXED_WINDOW", limit: 1, windowMs: 60_000, capacity: 1, action: "REJECT" } as const;
  const refusal = { conforming: false, remaining: 0, resetAtMs: 60_000, retryAfterMs: 30_000, delayMs: 0 };

  it("holds at most its size, dropping the oldest entry first", () => {
    const cache = new OverLimitCache(2);
    for (const key of ["a", "b", "c"]) cache.remember({ ruleId: "r", key, params }, 1, refusal, 0, 0);
    expect(cache.size).toBe(2);
    expect(cache.refusal({ ruleId: "r", key: "a", params }, 1, 0)).toBeNull();
    expect(cache.refusal({ ruleId: "r", key: "c", params }, 1, 0)).not.toBeNull();
  });

  it("evicts the least recently used: a refused bucket that is read again stays, an untouched one goes", () => {
    const cache = new OverLimitCache(2);
    const bucket = (key: string) => ({ ruleId: "r", key, params });
    cache.remember(bucket("hammered"), 1, refusal, 0, 0);
    cache.remember(bucket("quiet"), 1, refusal, 0, 0);
    expect(cache.refusal(bucket("hammered"), 1, 0)).not.toBeNull();
    cache.remember(bucket("new"), 1, refusal, 0, 0);
    expect(cache.size).toBe(2);
    expect(cache.refusal(bucket("quiet"), 1, 0)).toBeNull();
    expect(cache.refusal(bucket("hammered"), 1, 0)).not.toBeNull();
    expect(cache.refusal(bucket("new"), 1, 0)).not.toBeNull();
  });

  it("stays at exactly its size through many insertions and deletions, keeping the most recent", () => {
    const cache = new OverLimitCache(1000);
    const bucket = (i: number) => ({ ruleId: "r", key: `user:u${i}`, params });
    let largest = 0;
    for (let i = 0; i < 50_000; i++) {
      cache.remember(bucket(i), 1, refusal, 0, 0);
      if (i % 3 === 0) cache.forget("r", `user:u${i - 1}`);
      largest = Math.max(largest, cache.size);
    }
    expect(largest).toBe(1000);
    expect(cache.size).toBe(1000);
    for (let i = 49_000; i < 50_000; i++) expect(cache.refusal(bucket(i), 1, 0) !== null).toBe(i % 3 !== 2);
  });

  it("holds at most 512 bytes an entry on average however long the keys, keeping the most recent", () => {
    const cache = new OverLimitCache(100);
    // Keys of 8,000 characters (an endpoint's path, say): about 16 KB each, three fit in 100 x 512 bytes.
    const bucket = (i: number) => ({ ruleId: "r", key: `endpoint:GET /${"x".repeat(8_000)}/${i}`, params });
    for (let i = 0; i < 100; i++) cache.remember(bucket(i), 1, refusal, 0, 0);
    expect(cache.size).toBe(3);
    expect(cache.refusal(bucket(99), 1, 0)).not.toBeNull();
    expect(cache.refusal(bucket(96), 1, 0)).toBeNull();
  });

  it("finds every entry it holds of a rule whatever happens to the entries of that rule and others (it looks up only rules it holds entries of)", () => {
    // A model of what it holds, least recently used first, each bucket's refusal good until 30 s after it was
    // remembered: entries leave by eviction (the least recently used of 3), by forget, by expiry when met, or are
    // replaced by a longer refusal; remembering a refusal it holds as long already counts as a use.
    const rules = ["r1", "r2", "r3"];
    const step = fc.record({ op: fc.constantFrom("remember", "refusal", "forget"), rule: fc.constantFrom(...rules), key: fc.constantFrom("a", "b"), at: fc.integer({ min: 0, max: 3 }) });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const cache = new OverLimitCache(3);
        const held: { id: string; until: number }[] = [];
        const find = (id: string) => held.findIndex((e) => e.id === id);
        let now = 0;
        for (const { op, rule, key, at } of steps) {
          now += at * 10_000;
          const bucket = { ruleId: rule, key, params };
          const id = `${rule}/${key}`;
          const i = find(id);
          if (op === "remember") {
            cache.remember(bucket, 1, refusal, now, now);
            const until = now + 30_000;
            if (i !== -1 && held[i]!.until >= until) {
              // Kept as it is, but looked up: the most recently used now.
              held.push(held.splice(i, 1)[0]!);
              continue;
            }
            if (i !== -1) held.splice(i, 1);
            held.push({ id, until });
            if (held.length > 3) held.shift();
          } else if (op === "forget") {
            cache.forget(rule, key);
            if (i !== -1) held.splice(i, 1);
          } else {
            const live = i !== -1 && held[i]!.until > now;
            expect(cache.refusal(bucket, 1, now) !== null).toBe(live);
            if (i !== -1) {
              const [entry] = held.splice(i, 1);
              if (live) held.push(entry!);
            }
          }
          expect(cache.size).toBe(held.length);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("keeps nothing for conforming outcomes", () => {
    const cache = new OverLimitCache(2);
    cache.remember({ ruleId: "r", key: "a", params }, 1, { ...refusal, conforming: true, retryAfterMs: null }, 0, 0);
    expect(cache.size).toBe(0);
  });

  it("drops an expired entry when it meets it", () => {
    const cache = new OverLimitCache(2);
    cache.remember({ ruleId: "r", key: "a", params }, 1, refusal, 1000, 1000);
    expect(cache.refusal({ ruleId: "r", key: "a", params }, 1, 30_999)?.outcome.retryAfterMs).toBe(1);
    expect(cache.refusal({ ruleId: "r", key: "a", params }, 1, 31_000)).toBeNull();
    expect(cache.size).toBe(0);
  });
});

/** The only rule of a book, as the cache sees its buckets. */
function bucketOf(book: RuleBook) {
  const rule = book.list()[0]!;
  return { ruleId: rule.id, params: book.match(request())[0]!.params };
}

function changed(rule: Rule, fields: Partial<Rule>): Rule {
  return { ...rule, ...fields, version: rule.version + 1 };
}

function ruleChange(rule: Rule): RuleChange {
  return { kind: "UPDATED", ruleId: rule.id, tenantId: rule.tenantId, version: rule.version, rule, at: new Date() };
}
