import type { Calendar } from "../calendar.js";
import type { Action, Algorithm, Reach } from "../rule.js";

/** What an algorithm needs of a rule, with time in milliseconds. */
export interface LimitParams {
  algorithm: Algorithm;
  limit: number;
  /** With a calendar, the longest its period can be (LONGEST_PERIOD_MS): what bounds how long a state counts. */
  windowMs: number;
  /** FIXED_WINDOW: the window is the calendar's period containing now, not windowMs aligned on the epoch. */
  calendar?: Calendar;
  /** Token bucket capacity or leaky bucket line length (burst, default limit); equal to limit elsewhere. */
  capacity: number;
  action: Action;
  /** GLOBAL: every region shares the limit (src/store/regions); absent or REGIONAL: each region has it whole. */
  reach?: Reach;
  /**
   * A GLOBAL rule's bucket, as the regional counter store sends it
   * (src/store/regions): the other regions whose counts of it add to this
   * region's (none while they cannot be reached). Absent for a REGIONAL rule.
   */
  sharedWith?: readonly string[];
}

/**
 * A bucket's stored state: a short tuple of integers, the same fields in the
 * same order as lua/decide.lua stores them (as doubles; its receipts write
 * them joined by ":").
 *   FIXED_WINDOW            [window index, current, next, window_ms]
 *   SLIDING_WINDOW_COUNTER  [window index, previous, current, next, window_ms]
 *   TOKEN_BUCKET / LEAKY    [debt in 1/window_ms units, time of debt, window_ms, drained at]
 *   SLIDING_WINDOW_LOG      [release time of each unit, oldest first]
 *   CONCURRENCY             [expiry time of each lease, soonest first] (Redis: a sorted set's scores)
 */
export type CounterState = readonly number[];

export interface Usage {
  remaining: number;
  /** When the bucket is back to its full limit if nothing else arrives. */
  resetAtMs: number;
}

/** One rule's verdict on one request, before the request as a whole is decided. */
export interface Verdict {
  /** The rule admits the request (for THROTTLE: possibly after delayMs). */
  conforming: boolean;
  /** THROTTLE: how long the request waits in line before it is served. */
  delayMs: number;
  /** When not conforming: how long until a request of this cost would conform. */
  retryAfterMs: number | null;
  /** The bucket once this request's units are counted. */
  ifAdmitted: Usage;
  /** The bucket as it stands, nothing counted. */
  current: Usage;
}

export interface Evaluation {
  verdict: Verdict;
  /** The state to store if the request is admitted. */
  next: CounterState;
}

/**
 * `elsewhere`: the states other regions hold of the same bucket, for a rule
 * whose limit all regions share (GLOBAL): their counts add to this state's
 * in every verdict, while only this state, with the request's units, is
 * stored. Only the window counters take them (rule validation allows GLOBAL
 * for no other algorithm).
 */
export type Evaluate = (state: CounterState | undefined, nowMs: number, params: LimitParams, cost: number, elsewhere?: readonly CounterState[]) => Evaluation;

/**
 * A request costing more than the rule can ever hold is refused, with the
 * rule's window as retryAfter: a bounded answer, not an endless wait.
 */
export function beyondCapacity(state: CounterState | undefined, current: Usage, params: LimitParams): Evaluation {
  return {
    verdict: { conforming: false, delayMs: 0, retryAfterMs: params.windowMs, ifAdmitted: current, current },
    next: state ?? [],
  };
}

export function admitted(next: CounterState, delayMs: number, ifAdmitted: Usage, current: Usage): Evaluation {
  return { verdict: { conforming: true, delayMs, retryAfterMs: null, ifAdmitted, current }, next };
}

export function refused(state: CounterState | undefined, retryAfterMs: number, current: Usage): Evaluation {
  return {
    verdict: { conforming: false, delayMs: 0, retryAfterMs, ifAdmitted: current, current },
    next: state ?? [],
  };
}
