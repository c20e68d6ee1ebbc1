/**
 * The reference model: each algorithm written from its definition, for
 * clarity and not speed. It keeps the natural state (units per window, one
 * release time per unit, a debt of tokens as an exact rational) and finds
 * every wait by searching time for the first moment the definition is met,
 * instead of the closed forms the implementations use. The property tests
 * require the TypeScript store, the Lua script and this model to agree.
 *
 * Definitions shared with the implementations (they are semantics, not
 * technique): the sliding window counter weighs the previous window by
 * ceil((W - e) * 65536 / W) / 65536; THROTTLE waits at most one window (a
 * leaky bucket's line holds `capacity` units); after a window change, what
 * still counted under the old window counts in the current window of the new
 * one, and a token debt is carried over rounded up to the new window's unit.
 */

import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { calendarPeriod } from "../../src/domain/calendar.js";

export interface ModelVerdict {
  conforming: boolean;
  delayMs: number;
  retryAfterMs: number | null;
  ifAdmitted: { remaining: number; resetAtMs: number };
  current: { remaining: number; resetAtMs: number };
}

export interface ModelEvaluation {
  verdict: ModelVerdict;
  /** Counts the request's units; call only when the request as a whole is admitted. */
  commit(): void;
}

export interface BucketModel {
  evaluate(now: number, params: LimitParams, cost: number): ModelEvaluation;
}

const ONE = 65536n;

/** The smallest t in [from, to] with ok(t), for a predicate that is monotone on the range; null if none. */
function firstTime(from: number, to: number, ok: (t: number) => boolean): number | null {
  if (from > to || !ok(to)) return null;
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function refusal(retryAfterMs: number, current: ModelVerdict["current"]): ModelEvaluation {
  return { verdict: { conforming: false, delayMs: 0, retryAfterMs, ifAdmitted: current, current }, commit: () => undefined };
}

/**
 * Units counted per window index, as last stored, with the window length they
 * were counted under. A check reads them converted to the rule as it is now;
 * only a counted request stores the converted view back.
 */
class WindowCounts {
  private windowMs = 0;
  private units = new Map<number, number>();

  /**
   * The counts seen under a window of `windowMs`. After a window change, what
   * still counts under the old window (the windows at these offsets from the
   * current one) counts in the current window of the new one.
   */
  view(now: number, windowMs: number, stillCounting: readonly number[]): Map<number, number> {
    if (this.windowMs === 0 || this.windowMs === windowMs) return new Map(this.units);
    const oldWindow = Math.floor(now / this.windowMs);
    const carried = stillCounting.reduce((sum, offset) => sum + (this.units.get(oldWindow + offset) ?? 0), 0);
    return carried > 0 ? new Map([[Math.floor(now / windowMs), carried]]) : new Map();
  }

  store(windowMs: number, units: Map<number, number>): void {
    this.windowMs = windowMs;
    this.units = units;
  }
}

function counted(units: Map<number, number>, window: number, cost: number): Map<number, number> {
  const next = new Map(units);
  next.set(window, (next.get(window) ?? 0) + cost);
  return next;
}

export class FixedWindowModel implements BucketModel {
  private readonly counts = new WindowCounts();

  evaluate(now: number, { limit, windowMs, action }: LimitParams, cost: number): ModelEvaluation {
    const units = this.counts.view(now, windowMs, [0, 1]);
    const g = Math.floor(now / windowMs);
    const c = (w: number) => units.get(w) ?? 0;
    const countIn = (w: number) => () => this.counts.store(windowMs, counted(units, w, cost));
    const usage = (extraNow: number, extraNext: number) => {
      const curr = c(g) + extraNow;
      const next = c(g + 1) + extraNext;
      return {
        remaining: Math.max(0, limit - curr - next),
        resetAtMs: next > 0 ? (g + 2) * windowMs : curr > 0 ? (g + 1) * windowMs : now,
      };
    };
    const current = usage(0, 0);
    if (cost > limit) return refusal(windowMs, current);
    const fits = (w: number) => c(w) + cost <= limit;
    const throttle = action === "THROTTLE";
    if (fits(g)) return admit(0, usage(cost, 0), countIn(g));
    if (throttle && fits(g + 1)) return admit((g + 1) * windowMs - now, usage(0, cost), countIn(g + 1));
    if (throttle) return refusal((g + 1) * windowMs - now, current);
    let k = g + 1;
    while (!fits(k)) k++;
    return refusal(k * windowMs - now, current);

    function admit(delayMs: number, ifAdmitted: ModelVerdict["current"], commit: () => void): ModelEvaluation {
      return { verdict: { conforming: true, delayMs, retryAfterMs: null, ifAdmitted, current }, commit };
    }
  }
}

/**
 * FIXED_WINDOW with a calendar, from its definition: units counted per
 * calendar period (keyed by its start), the period containing now and the
 * one after it found by calendarPeriod, a wait being the first period start
 * at which the request fits.
 */
export class CalendarWindowModel implements BucketModel {
  private units = new Map<number, number>();

  evaluate(now: number, { limit, windowMs, action, calendar }: LimitParams, cost: number): ModelEvaluation {
    const here = calendarPeriod(now, calendar!);
    const after = calendarPeriod(here.endMs, calendar!);
    const c = (start: number) => this.units.get(start) ?? 0;
    const usage = (extraNow: number, extraNext: number) => {
      const curr = c(here.startMs) + extraNow;
      const next = c(after.startMs) + extraNext;
      return { remaining: Math.max(0, limit - curr - next), resetAtMs: next > 0 ? after.endMs : curr > 0 ? here.endMs : now };
    };
    const current = usage(0, 0);
    if (cost > limit) return refusal(windowMs, current);
    const fits = (start: number) => c(start) + cost <= limit;
    const countIn = (start: number) => () => void this.units.set(start, c(start) + cost);
    const admit = (delayMs: number, ifAdmitted: ModelVerdict["current"], commit: () => void): ModelEvaluation => ({
      verdict: { conforming: true, delayMs, retryAfterMs: null, ifAdmitted, current },
      commit,
    });
    const throttle = action === "THROTTLE";
    if (fits(here.startMs)) return admit(0, usage(cost, 0), countIn(here.startMs));
    if (throttle && fits(after.startMs)) return admit(here.endMs - now, usage(0, cost), countIn(after.startMs));
    if (throttle) return refusal(here.endMs - now, current);
    let period = after;
    while (!fits(period.startMs)) period = calendarPeriod(period.endMs, calendar!);
    return refusal(period.startMs - now, current);
  }
}

export class SlidingWindowCounterModel implements BucketModel {
  private readonly counts = new WindowCounts();

  evaluate(now: number, { limit, windowMs, action }: LimitParams, cost: number): ModelEvaluation {
    const units = this.counts.view(now, windowMs, [-1, 0, 1]);
    const W = BigInt(windowMs);
    const weight = (t: number) => {
      const elapsed = BigInt(t - Math.floor(t / windowMs) * windowMs);
      return ((W - elapsed) * ONE + W - 1n) / W; // ceil((W - e) * ONE / W)
    };
    const c = (w: number) => BigInt(units.get(w) ?? 0);
    /** Does a request of `cost` fit at time t, counted in t's window? */
    const fitsAt = (t: number) => {
      const w = Math.floor(t / windowMs);
      return c(w - 1) * weight(t) + (c(w) + BigInt(cost)) * ONE <= BigInt(limit) * ONE;
    };
    const g = Math.floor(now / windowMs);
    const usage = (extraNow: number, extraNext: number) => {
      const prev = c(g - 1);
      const curr = c(g) + BigInt(extraNow);
      const next = c(g + 1) + BigInt(extraNext);
      const weighted = (prev * weight(now) + ONE - 1n) / ONE;
      const remaining = BigInt(limit) - curr - next - weighted;
      return {
        remaining: Number(remaining > 0n ? remaining : 0n),
        resetAtMs: next > 0n ? (g + 3) * windowMs : curr > 0n ? (g + 2) * windowMs : prev > 0n ? (g + 1) * windowMs : now,
      };
    };
    const current = usage(0, 0);
    if (cost > limit) return refusal(windowMs, current);

    const throttle = action === "THROTTLE";
    // Inside one window the weight only falls, so "fits" turns true once and stays: search each window in turn.
    let release: number | null = null;
    const firstWindow = throttle && c(g + 1) > 0n ? g + 1 : g;
    for (let w = firstWindow; release === null; w++) {
      release = firstTime(Math.max(now, w * windowMs), (w + 1) * windowMs - 1, fitsAt);
    }
    const wait = release - now;
    const releaseWindow = Math.floor(release / windowMs);
    if (!throttle) {
      if (wait > 0) return refusal(wait, current);
    } else if (wait > windowMs) {
      return refusal(wait - windowMs, current);
    }
    const ahead = releaseWindow - g;
    return {
      verdict: {
        conforming: true,
        delayMs: wait,
        retryAfterMs: null,
        ifAdmitted: ahead === 0 ? usage(cost, 0) : usage(0, cost),
        current,
      },
      commit: () => this.counts.store(windowMs, counted(units, releaseWindow, cost)),
    };
  }
}

export class SlidingWindowLogModel implements BucketModel {
  private releases: number[] = [];

  evaluate(now: number, { limit, windowMs, action }: LimitParams, cost: number): ModelEvaluation {
    const inWindowEndingAt = (t: number) => this.releases.filter((r) => r > t - windowMs).length;
    const live = this.releases.filter((r) => r > now - windowMs);
    const last = live.length > 0 ? live[live.length - 1]! : null;
    const usage = (entries: number, newest: number | null) => ({
      remaining: Math.max(0, limit - entries),
      resetAtMs: newest === null ? now : newest + windowMs,
    });
    const current = usage(live.length, last);
    if (cost > limit) return refusal(windowMs, current);
    const throttle = action === "THROTTLE";
    const notBefore = throttle && last !== null ? Math.max(now, last) : now;
    // The moments the count can drop are when a unit leaves; try them in order.
    const candidates = [notBefore, ...live.map((r) => r + windowMs)].filter((t) => t >= notBefore).sort((a, b) => a - b);
    const release = candidates.find((t) => inWindowEndingAt(t) + cost <= limit)!;
    const wait = release - now;
    const allowedWait = throttle ? windowMs : 0;
    if (wait > allowedWait) return refusal(wait - allowedWait, current);
    // A unit is never recorded before units already queued, so the log stays in release order.
    const stamp = last === null ? release : Math.max(release, last);
    return {
      verdict: { conforming: true, delayMs: wait, retryAfterMs: null, ifAdmitted: usage(live.length + cost, stamp), current },
      commit: () => {
        this.releases = [...live, ...new Array<number>(cost).fill(stamp)];
      },
    };
  }
}

/**
 * TOKEN_BUCKET and LEAKY_BUCKET: a debt of tokens, exact as a rational with
 * denominator window_ms, that drains at limit tokens per window.
 */
export class MeterModel implements BucketModel {
  /** Debt in 1/windowMs token units, as last stored. */
  private stored: { debt: bigint; since: number; windowMs: number; drainedAt: number } | null = null;

  constructor(private readonly kind: "TOKEN_BUCKET" | "LEAKY_BUCKET") {}

  evaluate(now: number, { limit, windowMs, capacity, action }: LimitParams, cost: number): ModelEvaluation {
    const W = BigInt(windowMs);
    const L = BigInt(limit);
    const stored = this.stored;
    // A debt counts until it would have drained under the rule it was taken under; a window change rescales it, rounding up.
    const live = stored !== null && now < stored.drainedAt;
    const base = !live ? 0n : stored.windowMs === windowMs ? stored.debt : BigInt(Math.ceil((Number(stored.debt) / stored.windowMs) * windowMs));
    const since = stored?.since ?? now;
    const debtAt = (t: number) => {
      const drained = BigInt(Math.max(0, t - since)) * L;
      return base > drained ? base - drained : 0n;
    };
    const full = BigInt(capacity) * W;
    const need = BigInt(cost) * W;
    const throttle = action === "THROTTLE";
    const line = throttle && this.kind === "TOKEN_BUCKET" ? L * W : 0n;
    const debt = debtAt(now);
    const usage = (owed: bigint) => ({
      remaining: Number((full > owed ? full - owed : 0n) / W),
      resetAtMs: now + (firstTime(0, Number(owed), (d) => owed <= BigInt(d) * L) ?? 0),
    });
    const current = usage(debt);
    if (cost > capacity) return refusal(windowMs, current);
    const fitsAfter = (d: number) => debtAt(now + d) + need <= full + line;
    if (!fitsAfter(0)) {
      const horizon = Number(debt / L) + 1;
      return refusal(firstTime(0, horizon, fitsAfter)!, current);
    }
    const owed = debt + need;
    let delayMs = 0;
    if (throttle && this.kind === "TOKEN_BUCKET") {
      // Waits until its own tokens exist: until the debt beyond the capacity has drained.
      delayMs = firstTime(0, Number(owed), (d) => owed - BigInt(d) * L <= full)!;
    } else if (throttle) {
      // Waits for the units ahead of it in line to leak out.
      delayMs = firstTime(0, Number(debt), (d) => debtAt(now + d) === 0n)!;
    }
    return {
      verdict: { conforming: true, delayMs, retryAfterMs: null, ifAdmitted: usage(owed), current },
      commit: () => {
        const at = Math.max(now, since);
        this.stored = { debt: owed, since: at, windowMs, drainedAt: at + Number((owed + L - 1n) / L) };
      },
    };
  }
}

/**
 * CONCURRENCY by its definition: the leases held, each with when it frees
 * itself; a check conforms while fewer than limit are held at its time, and
 * a refused one waits for the first moment that is so again.
 */
export class ConcurrencyModel implements BucketModel {
  readonly leases = new Map<string, number>();
  /** The lease the next admitted check takes (tests that release leases name them; others get a fresh one each time). */
  lease: string | null = null;
  private drawn = 0;

  evaluate(now: number, params: LimitParams): ModelEvaluation {
    const { limit, windowMs } = params;
    const heldAt = (expiries: readonly number[], t: number) => expiries.filter((e) => e > t).length;
    const live = [...this.leases.values()].filter((e) => e > now);
    // One slot more than now: fewer held than now (or than the limit, for a bucket over it).
    const slotFrees = (expiries: readonly number[]) => firstTime(now, Math.max(now, ...expiries), (t) => heldAt(expiries, t) < Math.min(expiries.length, limit))!;
    const usage = (expiries: readonly number[]) => ({ remaining: Math.max(0, limit - expiries.length), resetAtMs: expiries.length === 0 ? now : slotFrees(expiries) });
    const current = usage(live);
    if (live.length >= limit) return refusal(slotFrees(live) - now, current);
    const lease = this.lease ?? `model-${this.drawn++}`;
    return {
      verdict: { conforming: true, delayMs: 0, retryAfterMs: null, ifAdmitted: usage([...live, now + windowMs]), current },
      commit: () => void this.leases.set(lease, now + windowMs),
    };
  }

  /** True when the lease was still held at `now`. */
  release(lease: string, now: number): boolean {
    const expiresAt = this.leases.get(lease);
    this.leases.delete(lease);
    return expiresAt !== undefined && expiresAt > now;
  }

  liveAt(now: number): number {
    return [...this.leases.values()].filter((e) => e > now).length;
  }
}

export function modelFor(algorithm: LimitParams["algorithm"]): BucketModel {
  switch (algorithm) {
    case "FIXED_WINDOW":
      return new FixedWindowModel();
    case "SLIDING_WINDOW_COUNTER":
      return new SlidingWindowCounterModel();
    case "SLIDING_WINDOW_LOG":
      return new SlidingWindowLogModel();
    case "TOKEN_BUCKET":
    case "LEAKY_BUCKET":
      return new MeterModel(algorithm);
    case "CONCURRENCY":
      return new ConcurrencyModel();
  }
}

/** Several buckets decided together: allowed only if every enforcing rule conforms; then each conforming one counts. */
export function decideModels(
  buckets: { model: BucketModel; params: LimitParams }[],
  now: number,
  cost: number,
  dryRun: boolean,
): { allowed: boolean; outcomes: { conforming: boolean; remaining: number; resetAtMs: number; retryAfterMs: number | null; delayMs: number }[] } {
  const evaluations = buckets.map(({ model, params }) => model.evaluate(now, params, cost));
  const allowed = evaluations.every((e, i) => e.verdict.conforming || buckets[i]!.params.action === "LOG_ONLY");
  const outcomes = evaluations.map(({ verdict, commit }) => {
    const counted = allowed && verdict.conforming;
    if (counted && !dryRun) commit();
    const usage = counted ? verdict.ifAdmitted : verdict.current;
    return {
      conforming: verdict.conforming,
      remaining: usage.remaining,
      resetAtMs: usage.resetAtMs,
      retryAfterMs: verdict.retryAfterMs,
      delayMs: counted ? verdict.delayMs : 0,
    };
  });
  return { allowed, outcomes };
}
