/**
 * Property tests: random sequences of (clock step, cost, dry run, rule change)
 * go through the reference model, the in-memory store (the TypeScript
 * arithmetic), the Redis store (lua/decide.lua on real Redis) and the Redis
 * store on a Redis Cluster of this suite's own, where the rules of one request
 * land in different slots and are decided by reserve and release; every step
 * must give the same decision, remaining, reset, retryAfter and delay, to the
 * millisecond. Time is injected (a ManualClock, passed to Lua through ARGV);
 * nothing sleeps. PROPERTY_RUNS raises the number of sequences per property.
 */

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { CounterCall, CounterStore } from "../../src/domain/ports.js";
import { LONGEST_PERIOD_MS, type Calendar } from "../../src/domain/calendar.js";
import { ACTIONS, ALGORITHMS } from "../../src/domain/rule.js";
import { ManualClock } from "../support/clock.js";
import { useStoreSubjects } from "./store-subjects.js";
import { redisAvailable, redisBinariesAvailable } from "../support/services.js";
import { anyParams, paramsFor, stepArbitrary } from "./arbitraries.js";
import { CalendarWindowModel, decideModels, modelFor, type BucketModel } from "./reference-model.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
/** Each sequence takes a few milliseconds against Redis; long runs get the time they need. */
const TIMEOUT_MS = 20_000 + RUNS * 60;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

const withRedis = await redisAvailable();
const withCluster = await redisBinariesAvailable();

describe("the implementations agree with the reference model", () => {
  const { stores } = useStoreSubjects({ withRedis, withCluster });
  let sequence = 0;
  let leases = 0;

  async function agree(
    buckets: { ruleId: string; key: string; model: BucketModel; params: LimitParams }[],
    clock: ManualClock,
    subjects: CounterStore[],
    cost: number,
    dryRun: boolean,
  ): Promise<void> {
    const now = clock.now();
    const expected = { nowMs: now, ...decideModels(buckets, now, cost, dryRun) };
    // A lease of its own for every check: these sequences never release one, they only expire.
    const call: CounterCall = { buckets: buckets.map(({ ruleId, key, params }) => ({ ruleId, key, params })), cost, dryRun, lease: `lease-${sequence}-${now}-${leases++}` };
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

  /** Calendars, each from a moment before a change of its periods' length: a clock change, a month's end, a leap day, a year's end. */
  const calendarCases: { calendar: Calendar; from: string; stepMs: number }[] = [
    { calendar: { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null }, from: "2026-03-28T12:00:00Z", stepMs: 4 * 3_600_000 },
    { calendar: { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null }, from: "2026-10-24T12:00:00Z", stepMs: 4 * 3_600_000 },
    { calendar: { period: "DAY", timeZone: "America/New_York", weekStartsOn: null }, from: "2026-03-07T12:00:00Z", stepMs: 4 * 3_600_000 },
    { calendar: { period: "HOUR", timeZone: "America/New_York", weekStartsOn: null }, from: "2026-11-01T04:00:00Z", stepMs: 20 * 60_000 },
    { calendar: { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null }, from: "2028-02-28T12:00:00Z", stepMs: 6 * 3_600_000 },
    { calendar: { period: "MONTH", timeZone: "America/New_York", weekStartsOn: null }, from: "2027-01-30T12:00:00Z", stepMs: 6 * 3_600_000 },
    { calendar: { period: "WEEK", timeZone: "Europe/Berlin", weekStartsOn: "SUNDAY" }, from: "2026-10-24T00:00:00Z", stepMs: 12 * 3_600_000 },
    { calendar: { period: "YEAR", timeZone: "Europe/Berlin", weekStartsOn: null }, from: "2026-12-31T12:00:00Z", stepMs: 3 * 3_600_000 },
  ];

  it("FIXED_WINDOW with a calendar: same decisions step by step across clock changes and month ends", async () => {
    const steps = fc.record({
      fraction: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 5, arbitrary: fc.double({ min: 0, max: 1, noNaN: true }) }),
      cost: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 8 }) }),
      dryRun: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...calendarCases),
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom(...ACTIONS),
        fc.array(steps, { minLength: 1, maxLength: 30 }),
        async ({ calendar, from, stepMs }, limit, action, drawn) => {
          const clock = new ManualClock(Date.parse(from));
          const subjects = stores(clock);
          const params: LimitParams = { algorithm: "FIXED_WINDOW", limit, windowMs: LONGEST_PERIOD_MS[calendar.period], capacity: limit, action, calendar };
          const bucket = { ruleId: `c${sequence++}`, key: "user:u1", model: new CalendarWindowModel(), params };
          for (const step of drawn) {
            clock.advance(Math.floor(step.fraction * stepMs));
            await agree([bucket], clock, subjects, step.cost, step.dryRun);
          }
        },
      ),
      { numRuns: RUNS },
    );
  }, TIMEOUT_MS);

  it("several rules at once: all or nothing, shadow rules never deny, dry runs count nothing, through rule changes", async () => {
    // Each rule comes with another version of itself that a step may switch to.
    const versioned = anyParams.chain((p) => fc.tuple(fc.constant(p), paramsFor(p.algorithm)));
    await fc.assert(
      fc.asyncProperty(
        fc.array(versioned, { minLength: 2, maxLength: 4 }),
        fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }),
        async (versions, steps) => {
          const clock = new ManualClock(T0);
          const subjects = stores(clock);
          const run = sequence++;
          const buckets = versions.map(([p], i) => ({ ruleId: `m${run}-${i}`, key: "user:u1", model: modelFor(p.algorithm), params: p }));
          for (const [n, step] of steps.entries()) {
            clock.advance(step.advanceMs);
            if (step.changeRule) {
              const changed = n % buckets.length;
              const [first, second] = versions[changed]!;
              buckets[changed]!.params = buckets[changed]!.params === first ? second : first;
            }
            await agree(buckets, clock, subjects, step.cost, step.dryRun);
          }
        },
      ),
      { numRuns: RUNS },
    );
  }, TIMEOUT_MS);
});
