/**
 * The batching store (src/store/batching-counter-store.ts): the conformance
 * suite through it, over the memory store and over Redis; then what it adds.
 * A turn's callers reach the store behind in one round trip, each answered
 * what that store answers it alone (a property, against a twin store decided
 * one caller at a time); groups stay within their size, callers with a budget
 * of their own go alone, and a failure reaches only its group.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { BucketRef, CounterCall } from "../../src/domain/ports.js";
import { BatchingCounterStore } from "../../src/store/batching-counter-store.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { RecordingCounterStore } from "../support/recording-counter-store.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 100);
const MAX_CALLS = 100;

counterStoreConformance("batching over memory", async (clock) => {
  const inner = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
  const store = new BatchingCounterStore({ inner, maxCallsPerDecide: MAX_CALLS });
  return { store, cleanup: () => store.close() };
});

describe.runIf(await redisAvailable())("batching over redis", () => {
  counterStoreConformance("batching over redis", async (clock) => {
    const { redis, prefix, cleanup } = testRedis();
    const store = new BatchingCounterStore({ inner: new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 64), clock }), maxCallsPerDecide: MAX_CALLS });
    return { store, cleanup };
  });

  it("sends a turn's checks to Redis in one round trip, and admits exactly the limit of a bucket they share", async () => {
    const { redis, prefix, cleanup } = testRedis();
    try {
      const recording = new RecordingCounterStore(new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 64) }));
      const store = new BatchingCounterStore({ inner: recording, maxCallsPerDecide: MAX_CALLS });
      const shared = bucket("per-ip", 5, "ip:10.0.0.1");
      const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => store.decide([call([bucket("per-user", 100, `user:u${i}`), shared])])));
      expect(recording.roundTrips).toHaveLength(1);
      expect(replies.map(([reply]) => reply!.allowed)).toEqual([true, true, true, true, true, false, false, false]);
      expect(replies.map(([reply]) => reply!.outcomes[1]!.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0]);
    } finally {
      await cleanup();
    }
  });
});

function bucket(ruleId: string, limit: number, key: string): BucketRef {
  const params: LimitParams = { algorithm: "SLIDING_WINDOW_COUNTER", limit, windowMs: 60_000, capacity: limit, action: "REJECT" };
  return { ruleId, key, params };
}

function call(buckets: BucketRef[], cost = 1): CounterCall {
  return { buckets, cost, dryRun: false };
}

function memoryBehind(clock = new ManualClock()): { recording: RecordingCounterStore; store: BatchingCounterStore } {
  const recording = new RecordingCounterStore(new MemoryCounterStore({ clock, sweepIntervalMs: 0 }));
  return { recording, store: new BatchingCounterStore({ inner: recording, maxCallsPerDecide: MAX_CALLS }) };
}

describe("BatchingCounterStore", () => {
  it("answers each caller of a turn what the store behind answers it alone, its calls in their order", async () => {
    const buckets = ["a", "b", "c"].flatMap((user) => [bucket("per-user", 3, `user:${user}`), bucket("per-ip", 5, "ip:1")]);
    const aCall = fc.record({ picks: fc.uniqueArray(fc.integer({ min: 0, max: buckets.length - 1 }), { minLength: 1, maxLength: 3 }), cost: fc.integer({ min: 1, max: 3 }) });
    // Turns of callers, each caller one to three calls.
    const turns = fc.array(fc.array(fc.array(aCall, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(turns, async (turns) => {
        const clock = new ManualClock();
        const { recording, store } = memoryBehind(clock);
        const alone = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
        for (const callers of turns) {
          const asked = callers.map((calls) => calls.map(({ picks, cost }) => call(picks.map((i) => buckets[i]!), cost)));
          const before = recording.roundTrips.length;
          const together = await Promise.all(asked.map((calls) => store.decide(calls)));
          expect(recording.roundTrips.length - before).toBe(1);
          for (const [i, calls] of asked.entries()) expect(together[i]).toEqual(await alone.decide(calls));
          clock.advance(7_000);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("keeps each round trip within maxCallsPerDecide calls, never splitting a caller's", async () => {
    const { recording, store } = memoryBehind();
    const sizes = [40, 30, 20, 40, 99, 1, 1];
    await Promise.all(sizes.map((size, caller) => store.decide(Array.from({ length: size }, (_, i) => call([bucket("r", 1_000, `user:${caller}-${i}`)])))));
    expect(recording.roundTrips.map((trip) => trip.calls.length)).toEqual([90, 40, 100, 1]);
  });

  it("sends alone, at once, a caller with a budget of its own or with a round trip's worth of calls", async () => {
    const { recording, store } = memoryBehind();
    const many = Array.from({ length: MAX_CALLS }, (_, i) => call([bucket("r", 1_000, `user:${i}`)]));
    const first = store.decide([call([bucket("r", 5, "user:x")])]);
    const budgeted = store.decide([call([bucket("r", 5, "user:y")])], { budgetMs: 20 });
    const large = store.decide(many);
    // Both went before the turn ended; the first waits for it.
    expect(recording.roundTrips.map((trip) => [trip.calls.length, trip.options])).toEqual([
      [1, { budgetMs: 20 }],
      [MAX_CALLS, undefined],
    ]);
    await Promise.all([first, budgeted, large]);
    expect(recording.roundTrips).toHaveLength(3);
  });

  it("fails the callers of a round trip that fails, and only them", async () => {
    const { recording, store } = memoryBehind();
    recording.failureOf = () => new Error("the store is gone");
    const failed = await Promise.allSettled([1, 2, 3].map((i) => store.decide([call([bucket("r", 5, `user:${i}`)])])));
    expect(failed.map((outcome) => outcome.status === "rejected" && (outcome.reason as Error).message)).toEqual(["the store is gone", "the store is gone", "the store is gone"]);
    recording.failureOf = () => null;
    const [reply] = await store.decide([call([bucket("r", 5, "user:1")])]);
    expect(reply).toMatchObject({ allowed: true, outcomes: [{ remaining: 4 }] });
  });
});
