/**
 * Leased budgets (src/store/leasing-counter-store.ts) over the real Redis
 * store: a hot bucket's checks are admitted from leases without round trips,
 * every admission is one the reference model admits too (no over-admission,
 * with several instances sharing the bucket), a denied request takes nothing
 * from a lease, and what is not leasable always goes to Redis. A counting
 * probe in front of the Redis store tells which buckets each round trip
 * carried; the clock is pinned, and Redis is given its time through ARGV.
 */

import fc from "fast-check";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { LONGEST_PERIOD_MS } from "../../src/domain/calendar.js";
import type { BucketRef } from "../../src/domain/ports.js";
import type { Algorithm } from "../../src/domain/rule.js";
import { LeasingCounterStore, MAX_LEASE_MS } from "../../src/store/leasing-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { deleteByPrefix } from "../harness/delete-by-prefix.js";
import { ManualClock } from "../support/clock.js";
import { RecordingCounterStore } from "../support/recording-counter-store.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";
import { modelFor } from "../model/reference-model.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const HOT = 5;

describe.runIf(await redisAvailable())("LeasingCounterStore over Redis", () => {
  let redis: Redis;
  let prefix: string;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  let counting: RecordingCounterStore;
  const stores: LeasingCounterStore[] = [];

  beforeAll(() => {
    ({ redis, prefix, cleanup } = testRedis());
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await deleteByPrefix(redis, prefix);
    clock = new ManualClock(T0);
    counting = new RecordingCounterStore(new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 4), clock }));
    stores.length = 0;
  });

  function instance(options: { hot?: number; leaseMs?: number } = {}): LeasingCounterStore {
    const store = new LeasingCounterStore({ inner: counting, clock, hotChecksPerSecond: options.hot ?? HOT, leaseMs: options.leaseMs ?? 1000 });
    stores.push(store);
    return store;
  }

  const params = (algorithm: Algorithm, limit: number, extra: Partial<LimitParams> = {}): LimitParams => ({
    algorithm,
    limit,
    windowMs: 60_000,
    capacity: limit,
    action: "REJECT",
    ...extra,
  });
  const bucket = (ruleId: string, p: LimitParams, key = "tenant:acme"): BucketRef => ({ ruleId, key, params: p });
  let leases = 0;
  const check = async (store: LeasingCounterStore, buckets: BucketRef[], cost = 1, dryRun = false) => {
    const [reply] = await store.decide([{ buckets, cost, dryRun, lease: `lease-${leases++}` }]);
    await store.leasesTaken();
    return reply!;
  };

  it("leases a bucket checked HOT times in a second, then admits from the lease without Redis", async () => {
    const store = instance({ leaseMs: 400 });
    const hot = bucket("hot", params("FIXED_WINDOW", 100_000));
    for (let i = 0; i < HOT; i++) await check(store, [hot], 2);
    // The fifth check made it hot: one lease call beside the five checks, of leaseMs of its units.
    expect(counting.callsOf("hot")).toBe(HOT + 1);
    const lease = counting.calls.at(-1)!;
    expect(lease.cost).toBe(Math.ceil((HOT * 2 * 400) / 1000));
    // Half of it admitted here alone; the check that leaves less than half takes the next lease, which joins what is left.
    for (let i = 0; i < lease.cost / 2; i++) expect((await check(store, [hot])).allowed).toBe(true);
    expect(counting.callsOf("hot")).toBe(HOT + 1);
    expect((await check(store, [hot])).allowed).toBe(true);
    expect(counting.callsOf("hot")).toBe(HOT + 2);
    const next = counting.calls.at(-1)!.cost;
    for (let i = 0; i < lease.cost / 2 - 1 + next / 2; i++) expect((await check(store, [hot])).allowed).toBe(true);
    expect(counting.callsOf("hot")).toBe(HOT + 2);
  });

  it("reports what the store had left at the grant plus what the lease holds, by the store's clock", async () => {
    const store = instance();
    const hot = bucket("hot", params("TOKEN_BUCKET", 1000));
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    const grant = counting.calls.at(-1)!.cost;
    const leftAtGrant = 1000 - HOT - grant;
    const reply = await check(store, [hot], 2);
    expect(reply.outcomes[0]).toMatchObject({ conforming: true, remaining: leftAtGrant + grant - 2, retryAfterMs: null });
    expect(reply.nowMs).toBe(T0);
    // Redis counted the lease when it was granted: a dry run there (reporting the bucket as if it admitted it) sees none of the lease's units.
    expect((await check(store, [hot], 1, true)).outcomes[0]!.remaining).toBe(leftAtGrant - 1);
  });

  it("gives a denied request's units back to the lease: the other bucket's refusal takes nothing", async () => {
    const store = instance();
    const hot = bucket("hot", params("FIXED_WINDOW", 1000));
    const strict = bucket("strict", params("FIXED_WINDOW", 1), "user:u1");
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    const grant = counting.calls.at(-1)!.cost;
    expect((await check(store, [hot, strict])).allowed).toBe(true);
    const refused = await check(store, [hot, strict]);
    expect(refused.allowed).toBe(false);
    // Both checks took hot's units from the lease; the refused one gave them back.
    expect((await check(store, [hot])).outcomes[0]!.remaining).toBe(1000 - HOT - grant + grant - 2);
  });

  it("never leases what must go to the store: dry runs, THROTTLE, LOG_ONLY, SLIDING_WINDOW_LOG, CONCURRENCY", async () => {
    const store = instance();
    const cases = [
      { name: "log", p: params("SLIDING_WINDOW_LOG", 1000) },
      { name: "in-flight", p: params("CONCURRENCY", 1000) },
      { name: "throttle", p: params("FIXED_WINDOW", 1000, { action: "THROTTLE" }) },
      { name: "shadow", p: params("FIXED_WINDOW", 1000, { action: "LOG_ONLY" }) },
    ];
    for (const { name, p } of cases) for (let i = 0; i < 3 * HOT; i++) await check(store, [bucket(name, p)]);
    for (const { name } of cases) expect(counting.callsOf(name)).toBe(3 * HOT);
    const hot = bucket("hot", params("FIXED_WINDOW", 1000));
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    const before = counting.callsOf("hot");
    await check(store, [hot], 1, true);
    expect(counting.callsOf("hot")).toBe(before + 1);
  });

  it("ends a window's lease with its window, a meter's before its debt drains below the lease, and any after MAX_LEASE_MS", async () => {
    const store = instance();
    const windowEnd = (Math.floor(T0 / 60_000) + 1) * 60_000;
    // 100,000 a minute: a meter's debt drains 1 token in 0.6 ms.
    for (const [algorithm, from, cost, lastsMs] of [
      ["FIXED_WINDOW", windowEnd - 300, 1, 300],
      ["SLIDING_WINDOW_COUNTER", windowEnd - 300, 1, 300],
      ["FIXED_WINDOW", T0, 1, MAX_LEASE_MS],
      // Owing 5 tokens before the lease: it lasts the 3 ms those take to drain.
      ["TOKEN_BUCKET", T0, 1, 3],
      // Owing 50,000: longer than a lease may last.
      ["TOKEN_BUCKET", T0 + 10_000, 10_000, MAX_LEASE_MS],
    ] as const) {
      clock.set(from);
      const hot = bucket(`${algorithm}-${from}`, params(algorithm, 100_000));
      for (let i = 0; i < HOT; i++) await check(store, [hot], cost);
      const calls = counting.callsOf(hot.ruleId);
      clock.set(from + lastsMs - 1);
      await check(store, [hot]);
      expect(counting.callsOf(hot.ruleId), `${algorithm} from ${from - T0}: still leased`).toBe(calls);
      clock.set(from + lastsMs);
      await check(store, [hot]);
      expect(counting.callsOf(hot.ruleId), `${algorithm} from ${from - T0}: lease over`).toBeGreaterThan(calls);
    }
  });

  it("ends a calendar rule's lease with its period: Europe/Berlin's day ends at 22:00 UTC in summer", async () => {
    const store = instance();
    const calendar = { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null } as const;
    const midnight = Date.parse("2026-03-29T22:00:00Z");
    clock.set(midnight - 300);
    const hot = bucket("calendar-day", params("FIXED_WINDOW", 100_000, { windowMs: LONGEST_PERIOD_MS.DAY, calendar }));
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    const calls = counting.callsOf(hot.ruleId);
    clock.set(midnight - 1);
    await check(store, [hot]);
    expect(counting.callsOf(hot.ruleId), "still leased").toBe(calls);
    clock.set(midnight);
    await check(store, [hot]);
    expect(counting.callsOf(hot.ruleId), "lease over").toBeGreaterThan(calls);
  });

  it("drops a lease when its bucket is reset or its rule takes new parameters", async () => {
    const store = instance();
    const hot = bucket("hot", params("FIXED_WINDOW", 1000));
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    let calls = counting.callsOf("hot");
    store.forget("hot", hot.key);
    await check(store, [hot]);
    expect(counting.callsOf("hot")).toBe(calls + 1);
    for (let i = 0; i < HOT; i++) await check(store, [hot]);
    calls = counting.callsOf("hot");
    const lowered = bucket("hot", params("FIXED_WINDOW", 10));
    expect((await check(store, [lowered])).outcomes[0]!.remaining).toBeLessThan(10);
    expect(counting.callsOf("hot")).toBe(calls + 1);
  });

  it("takes leases of a quarter of what is left at most, and none once too little is left", async () => {
    const store = instance({ leaseMs: 1000 });
    const hot = bucket("hot", params("FIXED_WINDOW", 40));
    const admitted: boolean[] = [];
    for (let i = 0; i < 60; i++) admitted.push((await check(store, [hot])).allowed);
    const leases = counting.calls.filter((call) => call.cost > 1).map((call) => call.cost);
    expect(leases.length).toBeGreaterThan(0);
    let left = 40 - HOT;
    for (const units of leases) {
      expect(units).toBeLessThanOrEqual(Math.floor(left / 4));
      left -= units;
    }
    // Every unit of this one instance's leases was used: nothing under-admitted, nothing over.
    expect(admitted.filter(Boolean)).toHaveLength(40);
  });

  for (const algorithm of ["FIXED_WINDOW", "SLIDING_WINDOW_COUNTER", "TOKEN_BUCKET", "LEAKY_BUCKET"] as const) {
    it(`${algorithm}: every admission of instances sharing a leased bucket is one the reference model admits`, async () => {
      let admitted = 0;
      let fromLeases = 0;
      // Bursts within a second make buckets hot; the limits let leases of several units be taken, and be spent.
      const step = fc.record({ instance: fc.integer({ min: 0, max: 2 }), cost: fc.integer({ min: 1, max: 3 }), advanceMs: fc.constantFrom(0, 0, 0, 0, 0, 0, 7, 90, 400, 2_500) });
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 40, maxLength: 160 }), fc.integer({ min: 10, max: 200 }), fc.constantFrom(1_000, 10_000), async (steps, limit, windowMs) => {
          await deleteByPrefix(redis, prefix);
          clock.set(T0);
          const p = params(algorithm, limit, { windowMs });
          const shared = bucket(`${algorithm}-${limit}`, p);
          const instances = [instance({ hot: 2 }), instance({ hot: 2 }), instance({ hot: 2 })];
          const model = modelFor(algorithm);
          for (const { instance: i, cost, advanceMs } of steps) {
            clock.advance(advanceMs);
            const callsBefore = counting.calls.length;
            const reply = await check(instances[i]!, [shared], cost);
            if (!reply.allowed) continue;
            admitted++;
            if (counting.calls.length === callsBefore) fromLeases++;
            const verdict = model.evaluate(clock.now(), p, cost);
            expect(verdict.verdict.conforming, `admitted ${cost} at +${clock.now() - T0} ms beyond what the model admits`).toBe(true);
            verdict.commit();
          }
        }),
        { numRuns: RUNS },
      );
      // The sequences did admit from leases, without a round trip.
      expect(fromLeases).toBeGreaterThan(admitted / 20);
    }, 120_000);
  }
});
