/**
 * Property tests: random sequences of (clock step, cost, dry run, rule change)
 * go through the reference model, the in-memory store (the TypeScript
 * arithmetic) and the Redis store (lua/decide.lua on real Redis); every step
 * must give the same decision, remaining, reset, retryAfter and delay, to the
 * millisecond. Time is injected (a ManualClock, passed to Lua through ARGV);
 * nothing sleeps. PROPERTY_RUNS raises the number of sequences per property.
 */

import fc from "fast-check";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { CounterCall, CounterStore } from "../../src/domain/ports.js";
import { ACTIONS, ALGORITHMS, type Algorithm } from "../../src/domain/rule.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";
import { decideModels, modelFor, type BucketModel } from "./reference-model.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
/** Each sequence takes a few milliseconds against Redis; long runs get the time they need. */
const TIMEOUT_MS = 20_000 + RUNS * 60;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

const withRedis = await redisAvailable();

function paramsFor(algorithm: Algorithm) {
  return fc
    .record({
      limit: fc.integer({ min: 1, max: 12 }),
      windowMs: fc.constantFrom(1_000, 2_000, 7_000, 60_000),
      extraCapacity: fc.integer({ min: -3, max: 8 }),
      action: fc.constantFrom(...ACTIONS),
    })
    .map(({ limit, windowMs, extraCapacity, action }): LimitParams => {
      const hasBurst = algorithm === "TOKEN_BUCKET" || algorithm === "LEAKY_BUCKET";
      return { algorithm, limit, windowMs, capacity: hasBurst ? Math.max(1, limit + extraCapacity) : limit, action };
    });
}

const stepArbitrary = fc.record({
  advanceMs: fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: 0, max: 400 }) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 5_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
  ),
  cost: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 15 }) }),
  dryRun: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  changeRule: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});

describe("the implementations agree with the reference model", () => {
  let redis: Redis | null = null;
  let cleanup: () => Promise<void> = async () => undefined;
  let layout: KeyLayout;
  let sequence = 0;

  beforeAll(() => {
    if (!withRedis) return;
    const r = testRedis();
    redis = r.redis;
    cleanup = r.cleanup;
    layout = new KeyLayout(r.prefix, 8);
  });
  afterAll(() => cleanup());

  function stores(clock: ManualClock): CounterStore[] {
    const memory = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
    return redis ? [memory, new RedisCounterStore(redis, { layout, clock })] : [memory];
  }

  async function agree(
    buckets: { ruleId: string; key: string; model: BucketModel; params: LimitParams }[],
    clock: ManualClock,
    subjects: CounterStore[],
    cost: number,
    dryRun: boolean,
  ): Promise<void> {
    const now = clock.now();
    const expected = { nowMs: now, ...decideModels(buckets, now, cost, dryRun) };
    const call: CounterCall = { buckets: buckets.map(({ ruleId, key, params }) => ({ ruleId, key, params })), cost, dryRun };
    for (const store of subjects) {
      const [reply] = await store.decide([call]);
      expect(reply, `${store.description} at +${now - T0} ms, cost ${cost}${dryRun ? ", dry run" : ""}: ${JSON.stringify(call.buckets.map((b) => b.params))}`).toEqual(expected);
    }
  }

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: same decisions step by step, through rule changes`, async () => {
      await fc.assert(
        fc.asyncProperty(
          paramsFor(algorithm),
          fc.array(fc.tuple(stepArbitrary, paramsFor(algorithm)), { minLength: 1, maxLength: 50 }),
          fc.integer({ min: 0, max: 59_999 }),
          async (initial, steps, offset) => {
            const clock = new ManualClock(T0 + offset);
            const subjects = stores(clock);
            const bucket = { ruleId: `p${sequence++}`, key: "user:u1", model: modelFor(algorithm), params: initial };
            for (const [step, changed] of steps) {
              clock.advance(step.advanceMs);
              if (step.changeRule) bucket.params = changed;
              await agree([bucket], clock, subjects, step.cost, step.dryRun);
            }
          },
        ),
        { numRuns: RUNS },
      );
    }, TIMEOUT_MS);
  }

  it("several rules at once: all or nothing, shadow rules never deny, dry runs count nothing", async () => {
    const bucketArbitrary = fc.constantFrom(...ALGORITHMS).chain((algorithm) => paramsFor(algorithm));
    await fc.assert(
      fc.asyncProperty(
        fc.array(bucketArbitrary, { minLength: 2, maxLength: 4 }),
        fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }),
        async (params, steps) => {
          const clock = new ManualClock(T0);
          const subjects = stores(clock);
          const run = sequence++;
          const buckets = params.map((p, i) => ({ ruleId: `m${run}-${i}`, key: "user:u1", model: modelFor(p.algorithm), params: p }));
          for (const step of steps) {
            clock.advance(step.advanceMs);
            await agree(buckets, clock, subjects, step.cost, step.dryRun);
          }
        },
      ),
      { numRuns: RUNS },
    );
  }, TIMEOUT_MS);
});
