/**
 * A GLOBAL bucket's copies (lua/merge.lua) and how decide.lua counts them,
 * on real Redis: two regions, each its own key prefix and its own clock (the
 * second one ahead of or behind the first), ship each other their states at
 * random moments; every decision of either must be what the
 * TypeScript arithmetic decides with the same states (countedElsewhere, the
 * twin of decide.lua's), and what is stored must be the region's own counts
 * alone. Then merging itself: idempotent, the latest window wins, counts of
 * one window only grow.
 */

import fc from "fast-check";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { evaluate, type CounterState, type LimitParams } from "../../src/domain/algorithms/index.js";
import { calendarBoundaries, calendarMarker, LONGEST_PERIOD_MS, type Calendar } from "../../src/domain/calendar.js";
import type { BucketRef } from "../../src/domain/ports.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { deleteByPrefix } from "../harness/delete-by-prefix.js";
import { ManualClock } from "../support/clock.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const REGIONS = ["eu", "us"] as const;

describe.runIf(await redisAvailable())("a GLOBAL bucket's copies of other regions' states", () => {
  let redis: Redis;
  let prefix: string;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  /** How far the second region's clock is from the first's. */
  let skewMs = 0;
  let stores: Record<(typeof REGIONS)[number], RedisCounterStore>;
  const nowIn = (region: (typeof REGIONS)[number]) => clock.now() + (region === "us" ? skewMs : 0);

  beforeAll(() => {
    ({ redis, prefix, cleanup } = testRedis());
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await deleteByPrefix(redis, prefix);
    clock = new ManualClock(T0);
    skewMs = 0;
    stores = {
      eu: new RedisCounterStore(redis, { layout: new KeyLayout(`${prefix}eu:`, 2), clock }),
      us: new RedisCounterStore(redis, { layout: new KeyLayout(`${prefix}us:`, 2), clock: { now: () => nowIn("us") } }),
    };
  });

  const other = (region: (typeof REGIONS)[number]) => (region === "eu" ? "us" : "eu");
  /** Ships `from`'s state of the bucket to the other region's Redis; the state shipped, as the arithmetic takes it. */
  async function ship(from: (typeof REGIONS)[number], bucket: BucketRef): Promise<CounterState | undefined> {
    const [state] = await stores[from].states([bucket]);
    if (state === "") return undefined;
    await stores[other(from)].mergeCopies([{ bucket, region: from, state: state! }]);
    return state!.split(":").map(Number);
  }

  const byMinuteInKolkata: Calendar = { period: "MINUTE", timeZone: "Asia/Kolkata", weekStartsOn: null };
  const variants = [
    { name: "FIXED_WINDOW", algorithm: "FIXED_WINDOW", calendar: undefined },
    { name: "SLIDING_WINDOW_COUNTER", algorithm: "SLIDING_WINDOW_COUNTER", calendar: undefined },
    { name: "FIXED_WINDOW with a calendar", algorithm: "FIXED_WINDOW", calendar: byMinuteInKolkata },
  ] as const;
  for (const { name, algorithm, calendar } of variants) {
    it(`${name}: decides every check on its own counts plus the last copy shipped, as the TypeScript arithmetic does`, async () => {
      const step = fc.record({
        region: fc.constantFrom(...REGIONS),
        cost: fc.integer({ min: 1, max: 4 }),
        advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 900 }), fc.integer({ min: 0, max: calendar === undefined ? 5_000 : 20_000 })),
        dryRun: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
        ship: fc.constantFrom("none", "none", "eu", "us", "both"),
        action: fc.constantFrom("REJECT", "REJECT", "LOG_ONLY", "THROTTLE"),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), fc.integer({ min: 2, max: 20 }), fc.constantFrom(1_000, 3_000), fc.integer({ min: -1_500, max: 1_500 }), async (steps, limit, windowMs, skew) => {
          await deleteByPrefix(redis, prefix);
          clock.set(T0);
          skewMs = skew;
          const own: Record<string, CounterState | undefined> = { eu: undefined, us: undefined };
          const copies: Record<string, CounterState | undefined> = { eu: undefined, us: undefined };
          for (const s of steps) {
            clock.advance(s.advanceMs);
            const params: LimitParams =
              calendar === undefined
                ? { algorithm, limit, windowMs, capacity: limit, action: s.action, reach: "GLOBAL" }
                : { algorithm, limit, windowMs: LONGEST_PERIOD_MS[calendar.period], capacity: limit, action: s.action, reach: "GLOBAL", calendar };
            const bucket: BucketRef = { ruleId: "global", key: "tenant:acme", params: { ...params, sharedWith: [other(s.region)] } };
            const [reply] = await stores[s.region].decide([{ buckets: [bucket], cost: s.cost, dryRun: s.dryRun }]);
            const copy = copies[other(s.region)];
            const expected = evaluate(own[s.region], nowIn(s.region), params, s.cost, copy === undefined ? [] : [copy]);
            const counted = expected.verdict.conforming;
            const usage = counted ? expected.verdict.ifAdmitted : expected.verdict.current;
            expect(reply!.outcomes[0]).toEqual({
              conforming: expected.verdict.conforming,
              remaining: usage.remaining,
              resetAtMs: usage.resetAtMs,
              retryAfterMs: expected.verdict.retryAfterMs,
              delayMs: counted ? expected.verdict.delayMs : 0,
            });
            if (counted && !s.dryRun) own[s.region] = expected.next;
            for (const from of REGIONS) {
              if (s.ship !== from && s.ship !== "both") continue;
              const shipped = await ship(from, bucket);
              expect(shipped, "the state shipped is the region's own counts alone").toEqual(own[from]);
              if (shipped !== undefined) copies[from] = shipped;
            }
          }
        }),
        { numRuns: RUNS },
      );
    }, 120_000);
  }

  describe("merging", () => {
    const params: LimitParams = { algorithm: "FIXED_WINDOW", limit: 100, windowMs: 60_000, capacity: 100, action: "REJECT", reach: "GLOBAL" };
    const bucket: BucketRef = { ruleId: "global", key: "tenant:acme", params };
    const window = Math.floor(T0 / 60_000);
    const copyOf = async () => {
      const [reply] = await stores.eu.decide([{ buckets: [{ ...bucket, params: { ...params, sharedWith: ["us"] } }], cost: 1, dryRun: true }]);
      return 100 - 1 - reply!.outcomes[0]!.remaining;
    };
    const merge = (state: string) => stores.eu.mergeCopies([{ bucket, region: "us", state }]);

    it("counts a shipment once however often it arrives, and keeps the latest window's", async () => {
      await merge(`${window}:30:0:60000`);
      await merge(`${window}:30:0:60000`);
      expect(await copyOf()).toBe(30);
      await merge(`${window}:20:0:60000`); // late: the copy already holds more of this window
      expect(await copyOf()).toBe(30);
      await merge(`${window}:35:0:60000`);
      expect(await copyOf()).toBe(35);
      await merge(`${window - 1}:90:0:60000`); // an earlier window: dropped
      expect(await copyOf()).toBe(35);
      await merge(`${window + 1}:5:0:60000`); // the other region has moved on: its current window is our next
      clock.advance(60_000);
      expect(await copyOf()).toBe(5);
    });

    it("keeps a calendar's copy of the latest period: a period's start is its index", async () => {
      const calendar: Calendar = { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null };
      const daily: LimitParams = { ...params, windowMs: LONGEST_PERIOD_MS.DAY, calendar };
      const marker = calendarMarker(calendar);
      const [, previous, start, end] = calendarBoundaries(T0, calendar);
      const mergeDaily = (state: string) => stores.eu.mergeCopies([{ bucket: { ...bucket, params: daily }, region: "us", state }]);
      const dailyCopy = async () => {
        const [reply] = await stores.eu.decide([{ buckets: [{ ...bucket, params: { ...daily, sharedWith: ["us"] } }], cost: 1, dryRun: true }]);
        return 100 - 1 - reply!.outcomes[0]!.remaining;
      };
      await mergeDaily(`${start}:30:0:${marker}`);
      await mergeDaily(`${previous}:90:0:${marker}`); // the day before: dropped
      expect(await dailyCopy()).toBe(30);
      await mergeDaily(`${end}:5:0:${marker}`); // the other region is in the next day already: the copy is its state of that day, our next
      expect(await dailyCopy()).toBe(5);
      clock.set(end!);
      expect(await dailyCopy()).toBe(5);
      await mergeDaily(`${start}:40:0:${marker}`); // now the day before: dropped
      expect(await dailyCopy()).toBe(5);
    });

    it("keeps a copy apart from the bucket's own counts, which alone are shipped on", async () => {
      await merge(`${window}:30:0:60000`);
      const shared: BucketRef = { ...bucket, params: { ...params, sharedWith: ["us"] } };
      await stores.eu.decide([{ buckets: [shared], cost: 2, dryRun: false }]);
      expect(await stores.eu.states([bucket])).toEqual([`${window}:2:0:60000`]);
    });
  });
});
