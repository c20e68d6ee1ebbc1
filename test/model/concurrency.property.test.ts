/**
 * CONCURRENCY under random interleavings of checks, releases and clock
 * steps: the in-memory store, the Redis store and the Redis store on a
 * Redis Cluster of this suite's own (where the check's other rule lives in
 * another slot, so that a check is decided by reserve and release) must
 * agree with the reference model step by step, and never hold more than
 * limit live leases. A released or expired lease frees its slot; a check
 * another rule refuses takes none. Then many checks at once on real Redis:
 * exactly limit admitted. PROPERTY_RUNS raises the number of sequences.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { BucketRef } from "../../src/domain/ports.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { useStoreSubjects } from "./store-subjects.js";
import { redisAvailable, redisBinariesAvailable } from "../support/services.js";
import { ConcurrencyModel, decideModels, modelFor } from "./reference-model.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const TIMEOUT_MS = 20_000 + RUNS * 100;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

const withRedis = await redisAvailable();
const withCluster = await redisBinariesAvailable();

type Step =
  | { kind: "check"; withOther: boolean; dryRun: boolean }
  | { kind: "release"; pick: number }
  | { kind: "advance"; ms: number };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("check" as const), withOther: fc.boolean(), dryRun: fc.integer({ min: 0, max: 9 }).map((n) => n === 0) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 10_000 })) }) },
  // Exactly a window (of one of the rules below), so that leases expire to the millisecond.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.constantFrom(1_000, 3_000, 7_000) }) },
);

const rulesArbitrary = fc.record({
  limit: fc.integer({ min: 1, max: 4 }),
  windowMs: fc.constantFrom(1_000, 3_000, 7_000),
  action: fc.constantFrom("REJECT" as const, "LOG_ONLY" as const),
  /** The other rule: a fixed window that refuses now and then. */
  otherLimit: fc.integer({ min: 1, max: 6 }),
});

describe("CONCURRENCY: leases under random interleavings", () => {
  const { stores, redis: ownRedis } = useStoreSubjects({ withRedis, withCluster });
  let sequence = 0;

  it("every store agrees with the model, and never holds more than limit live leases", async () => {
    await fc.assert(
      fc.asyncProperty(rulesArbitrary, fc.array(stepArbitrary, { minLength: 1, maxLength: 60 }), async ({ limit, windowMs, action, otherLimit }, steps) => {
        const clock = new ManualClock(T0);
        const subjects = stores(clock);
        const run = sequence++;
        const inFlight = new ConcurrencyModel();
        const params: LimitParams = { algorithm: "CONCURRENCY", limit, windowMs, capacity: limit, action };
        const otherParams: LimitParams = { algorithm: "FIXED_WINDOW", limit: otherLimit, windowMs: 10_000, capacity: otherLimit, action: "REJECT" };
        const leases = { ruleId: `c${run}`, key: "user:u1", model: inFlight, params };
        const other = { ruleId: `o${run}`, key: "user:u1", model: modelFor("FIXED_WINDOW"), params: otherParams };
        const granted: string[] = [];
        for (const [n, step] of steps.entries()) {
          const now = clock.now();
          const at = `step ${n} at +${now - T0} ms`;
          if (step.kind === "advance") {
            clock.advance(step.ms);
            continue;
          }
          if (step.kind === "release") {
            if (granted.length === 0) continue;
            const lease = granted[step.pick % granted.length]!;
            const expected = inFlight.release(lease, now);
            for (const store of subjects) expect(await store.releaseLease(lease, [leases]), `${store.description}, ${at}: release ${lease}`).toBe(expected);
            continue;
          }
          const buckets = step.withOther ? [leases, other] : [leases];
          const lease = `${run}-${n}`;
          inFlight.lease = lease;
          const held = inFlight.liveAt(now);
          const expected = { nowMs: now, ...decideModels(buckets, now, 1, step.dryRun) };
          const refs: BucketRef[] = buckets.map(({ ruleId, key, params: p }) => ({ ruleId, key, params: p }));
          for (const store of subjects) {
            const [reply] = await store.decide([{ buckets: refs, cost: 1, dryRun: step.dryRun, lease }]);
            expect(reply, `${store.description}, ${at}: ${JSON.stringify({ params, step })}`).toEqual(expected);
          }
          const tookSlot = inFlight.liveAt(now) > held;
          expect(tookSlot).toBe(expected.allowed && !step.dryRun && expected.outcomes[0]!.conforming);
          if (tookSlot) granted.push(lease);
          expect(inFlight.liveAt(now)).toBeLessThanOrEqual(limit);
        }
      }),
      { numRuns: RUNS },
    );
  }, TIMEOUT_MS);

  describe.runIf(withRedis)("many checks at once on real Redis", () => {
    it("admits exactly limit, then exactly as many as were released", async () => {
      const { redis, layout } = ownRedis()!;
      const store = new RedisCounterStore(redis, { layout });
      const leases: BucketRef = { ruleId: `burst-${sequence++}`, key: "tenant:acme", params: { algorithm: "CONCURRENCY", limit: 7, windowMs: 60_000, capacity: 7, action: "REJECT" } };
      const burst = (from: number) =>
        Promise.all(Array.from({ length: 200 }, (_, i) => store.decide([{ buckets: [leases], cost: 1, dryRun: false, lease: `lease-${from + i}` }]).then(([reply]) => (reply!.allowed ? `lease-${from + i}` : null))));
      const admitted = (await burst(0)).filter((lease): lease is string => lease !== null);
      expect(admitted).toHaveLength(7);
      const released = await Promise.all(admitted.slice(0, 3).map((lease) => store.releaseLease(lease, [leases])));
      expect(released).toEqual([true, true, true]);
      expect((await burst(1_000)).filter((lease) => lease !== null)).toHaveLength(3);
    });
  });
});
