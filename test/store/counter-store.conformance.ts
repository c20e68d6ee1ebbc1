/**
 * One conformance suite for every counter store: the same cases, the same
 * expected numbers. Time is a ManualClock the store reads (the memory store
 * directly, the Redis store through the script's ARGV), so windows are pinned
 * and nothing sleeps.
 */

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { LONGEST_PERIOD_MS, type Calendar } from "../../src/domain/calendar.js";
import type { BucketRef, CounterReply, CounterStore } from "../../src/domain/ports.js";
import { ManualClock } from "../support/clock.js";

export interface StoreUnderTest {
  store: CounterStore;
  cleanup(): Promise<void>;
}

export type StoreFactory = (clock: ManualClock) => Promise<StoreUnderTest>;

/** 2026-11-30T12:00:00Z: aligned to every window used below. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

function bucket(ruleId: string, params: Partial<LimitParams> & Pick<LimitParams, "algorithm">, key = "user:u1"): BucketRef {
  const limit = params.limit ?? 5;
  return {
    ruleId,
    key,
    params: { limit, windowMs: 60_000, capacity: params.capacity ?? limit, action: "REJECT", ...params },
  };
}

export function counterStoreConformance(name: string, factory: StoreFactory): void {
  describe(`${name} counter store conformance`, () => {
    let clock: ManualClock;
    let subject: StoreUnderTest;
    let store: CounterStore;

    beforeEach(async () => {
      clock = new ManualClock(T0);
      subject = await factory(clock);
      store = subject.store;
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    async function check(buckets: BucketRef[], options: { cost?: number; dryRun?: boolean } = {}): Promise<CounterReply> {
      const [reply] = await store.decide([{ buckets, cost: options.cost ?? 1, dryRun: options.dryRun ?? false }]);
      return reply!;
    }
    const remainingOf = (reply: CounterReply) => reply.outcomes.map((o) => o.remaining);

    describe("SLIDING_WINDOW_COUNTER", () => {
      const perUser = bucket("swc", { algorithm: "SLIDING_WINDOW_COUNTER", limit: 5 });

      it("admits the limit, then refuses with the exact wait for the weighted window", async () => {
        const remaining: number[] = [];
        for (let i = 0; i < 5; i++) {
          const reply = await check([perUser]);
          expect(reply.allowed).toBe(true);
          remaining.push(reply.outcomes[0]!.remaining);
        }
        expect(remaining).toEqual([4, 3, 2, 1, 0]);
        const sixth = await check([perUser]);
        expect(sixth).toEqual({
          nowMs: T0,
          allowed: false,
          // Next window, the previous 5 weigh 5 * (W - e) / W; 4 fit once e >= 12.001 s.
          outcomes: [{ conforming: false, remaining: 0, resetAtMs: T0 + 120_000, retryAfterMs: 72_001, delayMs: 0 }],
        });
      });

      it("weighs the previous window by its overlap with the trailing window", async () => {
        for (let i = 0; i < 5; i++) await check([perUser]);
        clock.advance(90_000); // half-way through the next window: the previous 5 weigh 2.5
        const reply = await check([perUser]);
        expect(reply.allowed).toBe(true);
        expect(reply.outcomes[0]!.remaining).toBe(1); // 5 - 1 - ceil(2.5)
        clock.advance(1);
        expect((await check([perUser])).allowed).toBe(true);
        expect((await check([perUser])).allowed).toBe(false);
      });

      it("forgets a bucket two windows after its last request", async () => {
        for (let i = 0; i < 5; i++) await check([perUser]);
        clock.advance(120_000);
        expect(remainingOf(await check([perUser]))).toEqual([4]);
      });
    });

    describe("TOKEN_BUCKET", () => {
      // Capacity 10, refilled at 5 tokens per 10 s: one token every 2 s.
      const tokens = bucket("tb", { algorithm: "TOKEN_BUCKET", limit: 5, windowMs: 10_000, capacity: 10 });

      it("spends the burst, then refills at limit per window, fractions kept", async () => {
        for (let i = 9; i >= 0; i--) expect(remainingOf(await check([tokens]))).toEqual([i]);
        const empty = await check([tokens]);
        expect(empty.allowed).toBe(false);
        expect(empty.outcomes[0]!.retryAfterMs).toBe(2000);
        clock.advance(700);
        expect((await check([tokens])).outcomes[0]!.retryAfterMs).toBe(1300);
        clock.advance(700);
        expect((await check([tokens])).outcomes[0]!.retryAfterMs).toBe(600);
        clock.advance(700); // 2.1 s: 1.05 tokens, the 0.05 kept
        const refilled = await check([tokens]);
        expect(refilled.allowed).toBe(true);
        expect(refilled.outcomes[0]!.remaining).toBe(0);
        expect((await check([tokens])).outcomes[0]!.retryAfterMs).toBe(1900);
      });

      it("under THROTTLE borrows up to one window of refill and says how long to wait", async () => {
        const throttled = bucket("tbt", { algorithm: "TOKEN_BUCKET", limit: 5, windowMs: 10_000, capacity: 2, action: "THROTTLE" });
        const delays: number[] = [];
        for (let i = 0; i < 7; i++) {
          const reply = await check([throttled]);
          expect(reply.allowed).toBe(true);
          delays.push(reply.outcomes[0]!.delayMs);
        }
        expect(delays).toEqual([0, 0, 2000, 4000, 6000, 8000, 10000]);
        const full = await check([throttled]);
        expect(full.allowed).toBe(false);
        expect(full.outcomes[0]!.retryAfterMs).toBe(2000);
      });
    });

    describe("FIXED_WINDOW", () => {
      const fixed = bucket("fw", { algorithm: "FIXED_WINDOW", limit: 3, windowMs: 10_000 });

      it("counts per aligned window and opens a fresh one at the boundary", async () => {
        clock.advance(4_000);
        for (let i = 2; i >= 0; i--) expect(remainingOf(await check([fixed]))).toEqual([i]);
        const refused = await check([fixed]);
        expect(refused.outcomes[0]).toEqual({ conforming: false, remaining: 0, resetAtMs: T0 + 10_000, retryAfterMs: 6_000, delayMs: 0 });
        clock.advance(6_000);
        expect(remainingOf(await check([fixed]))).toEqual([2]);
      });

      it("under THROTTLE queues a full window's worth for the next window, then refuses", async () => {
        const throttled = bucket("fwt", { algorithm: "FIXED_WINDOW", limit: 2, windowMs: 10_000, action: "THROTTLE" });
        clock.advance(2_500);
        const delays: number[] = [];
        for (let i = 0; i < 4; i++) delays.push((await check([throttled])).outcomes[0]!.delayMs);
        expect(delays).toEqual([0, 0, 7_500, 7_500]);
        const full = await check([throttled]);
        expect(full.allowed).toBe(false);
        expect(full.outcomes[0]!.retryAfterMs).toBe(7_500);
        clock.advance(7_500); // the queued two now count in this window
        expect((await check([throttled])).outcomes[0]!.delayMs).toBe(10_000);
      });
    });

    describe("FIXED_WINDOW with a calendar", () => {
      const calendarBucket = (ruleId: string, calendar: Calendar, action: LimitParams["action"] = "REJECT") =>
        bucket(ruleId, { algorithm: "FIXED_WINDOW", limit: 3, windowMs: LONGEST_PERIOD_MS[calendar.period], calendar, action });

      it("counts per day of Europe/Berlin across its 23-hour day, resetting at the true midnight", async () => {
        const daily = calendarBucket("cal-day", { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null });
        const midnight = Date.parse("2026-03-29T22:00:00Z"); // 2026-03-30 00:00 CEST, 23 hours after the day began
        clock.set(Date.parse("2026-03-29T10:00:00Z"));
        for (let i = 2; i >= 0; i--) expect((await check([daily])).outcomes[0]).toEqual({ conforming: true, remaining: i, resetAtMs: midnight, retryAfterMs: null, delayMs: 0 });
        expect((await check([daily])).outcomes[0]).toEqual({ conforming: false, remaining: 0, resetAtMs: midnight, retryAfterMs: midnight - clock.now(), delayMs: 0 });
        clock.set(midnight - 1);
        expect((await check([daily])).allowed).toBe(false);
        clock.set(midnight);
        expect((await check([daily])).outcomes[0]).toEqual({ conforming: true, remaining: 2, resetAtMs: Date.parse("2026-03-30T22:00:00Z"), retryAfterMs: null, delayMs: 0 });
      });

      it("under THROTTLE queues into America/New_York's next month, January's 31 days then February's 28", async () => {
        const monthly = calendarBucket("cal-month", { period: "MONTH", timeZone: "America/New_York", weekStartsOn: null }, "THROTTLE");
        const february = Date.parse("2027-02-01T05:00:00Z");
        const march = Date.parse("2027-03-01T05:00:00Z");
        clock.set(february - 60_000);
        for (let i = 0; i < 3; i++) await check([monthly]);
        const queued = await check([monthly]);
        expect(queued.outcomes[0]).toEqual({ conforming: true, remaining: 0, resetAtMs: march, retryAfterMs: null, delayMs: 60_000 });
        await check([monthly]);
        await check([monthly]);
        expect((await check([monthly])).outcomes[0]).toEqual({ conforming: false, remaining: 0, resetAtMs: march, retryAfterMs: 60_000, delayMs: 0 });
        clock.set(february);
        // The three queued now count in February; the next waits for March.
        expect((await check([monthly])).outcomes[0]).toEqual({ conforming: true, remaining: 0, resetAtMs: Date.parse("2027-04-01T04:00:00Z"), retryAfterMs: null, delayMs: march - february });
      });

      it("resets at the end of Europe/Berlin's 25-hour day and of February 2028's 29th", async () => {
        const daily = calendarBucket("cal-long-day", { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null });
        clock.set(Date.parse("2026-10-24T22:00:00Z"));
        await check([daily], { cost: 3 });
        const refused = await check([daily]);
        expect(refused.outcomes[0]!.retryAfterMs).toBe(25 * 3_600_000);
        clock.set(Date.parse("2026-10-25T23:00:00Z"));
        expect((await check([daily])).allowed).toBe(true);

        const monthly = calendarBucket("cal-leap", { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null });
        clock.set(Date.parse("2028-02-29T22:59:59.999Z"));
        expect((await check([monthly], { cost: 3 })).outcomes[0]!.resetAtMs).toBe(Date.parse("2028-02-29T23:00:00Z"));
        clock.advance(1);
        expect((await check([monthly])).outcomes[0]).toEqual({ conforming: true, remaining: 2, resetAtMs: Date.parse("2028-03-31T22:00:00Z"), retryAfterMs: null, delayMs: 0 });
      });

      it("keeps what a later window counted there when the clock goes back, a plain window's and a period's, reporting that window's end", async () => {
        const fixed = bucket("fw-back", { algorithm: "FIXED_WINDOW", limit: 3, windowMs: 10_000 });
        clock.set(T0 + 12_000);
        await check([fixed]);
        clock.set(T0 + 8_000);
        expect((await check([fixed])).outcomes[0]).toEqual({ conforming: true, remaining: 1, resetAtMs: T0 + 20_000, retryAfterMs: null, delayMs: 0 });

        const daily = calendarBucket("cal-back", { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null });
        const midnight = Date.parse("2026-10-25T23:00:00Z");
        clock.set(midnight + 1_000);
        await check([daily]);
        clock.set(midnight - 1_000);
        expect((await check([daily])).outcomes[0]).toEqual({ conforming: true, remaining: 1, resetAtMs: Date.parse("2026-10-26T23:00:00Z"), retryAfterMs: null, delayMs: 0 });
      });

      it("carries what a plain window counted over when the rule takes a calendar", async () => {
        clock.set(Date.parse("2026-12-03T10:00:00Z"));
        const plain = bucket("cal-change", { algorithm: "FIXED_WINDOW", limit: 3, windowMs: 3_600_000 });
        await check([plain], { cost: 2 });
        const calendar: Calendar = { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null };
        const monthly = { ...plain, params: { ...plain.params, windowMs: LONGEST_PERIOD_MS.MONTH, calendar } };
        expect((await check([monthly])).outcomes[0]).toEqual({ conforming: true, remaining: 0, resetAtMs: Date.parse("2026-12-31T23:00:00Z"), retryAfterMs: null, delayMs: 0 });
      });
    });

    describe("SLIDING_WINDOW_LOG", () => {
      const log = bucket("swl", { algorithm: "SLIDING_WINDOW_LOG", limit: 3, windowMs: 10_000 });

      it("is exact: a unit leaves the window exactly one window after it was admitted", async () => {
        for (let i = 0; i < 3; i++) {
          expect((await check([log])).allowed).toBe(true);
          clock.advance(1_000);
        }
        const refused = await check([log]);
        expect(refused.outcomes[0]).toEqual({ conforming: false, remaining: 0, resetAtMs: T0 + 12_000, retryAfterMs: 7_000, delayMs: 0 });
        clock.advance(6_999);
        expect((await check([log])).allowed).toBe(false);
        clock.advance(1);
        expect(remainingOf(await check([log]))).toEqual([0]);
      });

      it("under THROTTLE releases a request when an old unit leaves, first in first out", async () => {
        const throttled = bucket("swlt", { algorithm: "SLIDING_WINDOW_LOG", limit: 2, windowMs: 10_000, action: "THROTTLE" });
        await check([throttled]);
        clock.advance(3_000);
        await check([throttled]);
        clock.advance(1_000);
        expect((await check([throttled])).outcomes[0]!.delayMs).toBe(6_000); // releases at T0 + 10 s
        expect((await check([throttled])).outcomes[0]!.delayMs).toBe(9_000); // at T0 + 13 s
        const full = await check([throttled]);
        expect(full.allowed).toBe(false);
        expect(full.outcomes[0]!.retryAfterMs).toBe(6_000); // its release (T0 + 20 s) must come within one window
      });
    });

    describe("LEAKY_BUCKET", () => {
      it("under REJECT admits while the bucket has room", async () => {
        const leaky = bucket("lb", { algorithm: "LEAKY_BUCKET", limit: 1, windowMs: 1_000, capacity: 3 });
        for (let i = 2; i >= 0; i--) expect(remainingOf(await check([leaky]))).toEqual([i]);
        expect((await check([leaky])).outcomes[0]!.retryAfterMs).toBe(1_000);
      });

      it("under THROTTLE makes each request wait for the ones ahead to leak out", async () => {
        const leaky = bucket("lbt", { algorithm: "LEAKY_BUCKET", limit: 1, windowMs: 1_000, capacity: 3, action: "THROTTLE" });
        const delays: number[] = [];
        for (let i = 0; i < 3; i++) delays.push((await check([leaky])).outcomes[0]!.delayMs);
        expect(delays).toEqual([0, 1_000, 2_000]);
        expect((await check([leaky])).allowed).toBe(false);
        clock.advance(250);
        expect((await check([leaky])).outcomes[0]!.retryAfterMs).toBe(750);
      });
    });

    describe("CONCURRENCY", () => {
      const inFlight = bucket("conc", { algorithm: "CONCURRENCY", limit: 2, windowMs: 30_000 });
      const hold = async (lease: string, buckets: BucketRef[] = [inFlight], dryRun = false) => (await store.decide([{ buckets, cost: 1, dryRun, lease }]))[0]!;

      it("admits limit checks in flight whatever their cost, then refuses until the soonest lease expires", async () => {
        const [first] = await store.decide([{ buckets: [inFlight], cost: 7, dryRun: false, lease: "a" }]);
        // resetAt: when one slot more frees itself, the soonest lease's expiry.
        expect(first!.outcomes).toEqual([{ conforming: true, remaining: 1, resetAtMs: T0 + 30_000, retryAfterMs: null, delayMs: 0 }]);
        clock.advance(5_000);
        expect((await hold("b")).outcomes).toEqual([{ conforming: true, remaining: 0, resetAtMs: T0 + 30_000, retryAfterMs: null, delayMs: 0 }]);
        clock.advance(5_000);
        expect(await hold("c")).toEqual({
          nowMs: T0 + 10_000,
          allowed: false,
          outcomes: [{ conforming: false, remaining: 0, resetAtMs: T0 + 30_000, retryAfterMs: 20_000, delayMs: 0 }],
        });
        clock.set(T0 + 30_000); // a has expired: its holder never released it
        expect((await hold("c")).allowed).toBe(true);
        expect((await hold("d")).allowed).toBe(false);
      });

      it("frees a slot on release; a lease released twice, expired or unknown releases nothing", async () => {
        await hold("a");
        await hold("b");
        expect(await store.releaseLease("a", [inFlight])).toBe(true);
        expect(await store.releaseLease("a", [inFlight])).toBe(false);
        expect(await store.releaseLease("nobody", [inFlight])).toBe(false);
        expect((await hold("c")).outcomes[0]!.remaining).toBe(0);
        clock.advance(30_000);
        expect(await store.releaseLease("b", [inFlight])).toBe(false);
      });

      it("takes no lease when another rule refuses the check, nor in a dry run", async () => {
        const spent = bucket("conc-other", { algorithm: "FIXED_WINDOW", limit: 1 });
        await check([spent]);
        expect((await hold("a", [inFlight, spent])).allowed).toBe(false);
        expect((await hold("b", [inFlight], true)).allowed).toBe(true);
        expect(await store.releaseLease("a", [inFlight])).toBe(false);
        expect(remainingOf(await hold("c"))).toEqual([1]);
      });

      it("holds one lease in every CONCURRENCY bucket of the check, and one release frees them all", async () => {
        const perTenant = bucket("conc-tenant", { algorithm: "CONCURRENCY", limit: 1, windowMs: 60_000 }, "tenant:t1");
        expect(remainingOf(await hold("a", [inFlight, perTenant]))).toEqual([1, 0]);
        expect((await hold("b", [inFlight, perTenant])).allowed).toBe(false);
        expect(remainingOf(await hold("b", [inFlight]))).toEqual([0]);
        expect(await store.releaseLease("a", [inFlight, perTenant])).toBe(true);
        expect(remainingOf(await hold("c", [inFlight, perTenant]))).toEqual([0, 0]);
      });

      it("forgets every lease on reset", async () => {
        await hold("a");
        await hold("b");
        expect(await store.reset("conc", "user:u1")).toBe(true);
        expect(remainingOf(await hold("c"))).toEqual([1]);
      });
    });

    describe("a request over several rules", () => {
      const tight = bucket("tight", { algorithm: "SLIDING_WINDOW_COUNTER", limit: 1 });
      const loose = bucket("loose", { algorithm: "TOKEN_BUCKET", limit: 10 });

      it("is all or nothing: a refused request takes nothing from any rule", async () => {
        expect(remainingOf(await check([tight, loose]))).toEqual([0, 9]);
        const refused = await check([tight, loose]);
        expect(refused.allowed).toBe(false);
        expect(refused.outcomes.map((o) => o.conforming)).toEqual([false, true]);
        expect(remainingOf(refused)).toEqual([0, 9]);
        expect(remainingOf(await check([loose]))).toEqual([8]);
      });

      it("in a dry run returns the real decision and counts nothing", async () => {
        const dry = await check([tight, loose], { dryRun: true });
        expect(dry.allowed).toBe(true);
        expect(remainingOf(dry)).toEqual([0, 9]);
        expect(remainingOf(await check([tight, loose]))).toEqual([0, 9]);
      });

      it("lets a LOG_ONLY rule report a refusal without refusing, and counts only what it would have admitted", async () => {
        const shadow = bucket("shadow", { algorithm: "FIXED_WINDOW", limit: 1, action: "LOG_ONLY" });
        expect((await check([shadow, loose])).allowed).toBe(true);
        const second = await check([shadow, loose]);
        expect(second.allowed).toBe(true);
        expect(second.outcomes[0]!.conforming).toBe(false);
        expect(second.outcomes[0]!.retryAfterMs).toBe(60_000);
        expect(remainingOf(second)).toEqual([0, 8]);
      });

      it("charges the cost to every rule and refuses a cost no rule capacity can hold", async () => {
        expect(remainingOf(await check([loose], { cost: 4 }))).toEqual([6]);
        const tooBig = await check([loose], { cost: 11 });
        expect(tooBig.allowed).toBe(false);
        expect(tooBig.outcomes[0]!.retryAfterMs).toBe(60_000);
        expect(remainingOf(tooBig)).toEqual([6]);
      });
    });

    describe("rule changes mid-window", () => {
      it("take a raised limit at the next check and never let a lowered one overshoot", async () => {
        const at = (limit: number) => bucket("change", { algorithm: "FIXED_WINDOW", limit });
        for (let i = 0; i < 3; i++) await check([at(3)]);
        expect((await check([at(3)])).allowed).toBe(false);
        expect(remainingOf(await check([at(5)]))).toEqual([1]);
        const lowered = await check([at(2)]);
        expect(lowered.allowed).toBe(false);
        expect(lowered.outcomes[0]!.remaining).toBe(0);
      });
    });

    describe("reset", () => {
      it("forgets one bucket and leaves the others", async () => {
        const u1 = bucket("reset", { algorithm: "SLIDING_WINDOW_COUNTER", limit: 2 }, "user:u1");
        const u2 = bucket("reset", { algorithm: "SLIDING_WINDOW_COUNTER", limit: 2 }, "user:u2");
        await check([u1]);
        await check([u2]);
        expect(await store.reset("reset", "user:u1")).toBe(true);
        expect(await store.reset("reset", "user:u1")).toBe(false);
        expect(remainingOf(await check([u1]))).toEqual([1]);
        expect(remainingOf(await check([u2]))).toEqual([0]);
      });
    });

    describe("several calls at once", () => {
      it("applies them in order, each atomically", async () => {
        const one = bucket("batch", { algorithm: "FIXED_WINDOW", limit: 2 });
        const replies = await store.decide([1, 2, 3].map(() => ({ buckets: [one], cost: 1, dryRun: false })));
        expect(replies.map((r) => r.allowed)).toEqual([true, true, false]);
      });

      it("keeps apart buckets whose keys differ only beyond ASCII, in one call with ASCII ones", async () => {
        // ë is U+00EB and ǫ U+01EB: one byte apart in Latin-1's truncation, two different buckets in UTF-8.
        const keys = ["user:zoe", "user:zo\u00eb", "user:zo\u01eb", "user:😀", "user:\u00ff"];
        const calls = [...keys, ...keys, ...keys].map((key) => ({ buckets: [bucket("unicode", { algorithm: "FIXED_WINDOW", limit: 2 }, key)], cost: 1, dryRun: false }));
        const replies = await store.decide(calls);
        expect(replies.map((r) => r.allowed)).toEqual([...keys.map(() => true), ...keys.map(() => true), ...keys.map(() => false)]);
      });
    });
  });
}
