/**
 * The decision arithmetic in TypeScript: one function per algorithm, and the
 * all-or-nothing combination of a request's rules. The in-memory counter store
 * runs exactly this; lua/decide.lua is its twin for Redis, and the shared
 * conformance and property tests hold the two together.
 */

import { LONGEST_PERIOD_MS } from "../calendar.js";
import { capacityOf, windowSecondsOf, type Action, type Algorithm, type RuleSpec } from "../rule.js";
import { concurrencyExpiresAt, evaluateConcurrency } from "./concurrency.js";
import { evaluateFixedWindow, fixedWindowHorizonMs } from "./fixed-window.js";
import { evaluateLeakyBucket, evaluateTokenBucket, meterExpiresAt } from "./meter.js";
import { evaluateSlidingWindowCounter, slidingWindowCounterHorizonMs } from "./sliding-window-counter.js";
import { evaluateSlidingWindowLog, slidingWindowLogExpiresAt } from "./sliding-window-log.js";
import type { CounterState, Evaluate, Evaluation, LimitParams } from "./types.js";

export * from "./types.js";
export { MAX_EXACT } from "./integer.js";
export { windowFrame, type WindowFrame } from "./fixed-window.js";

const EVALUATORS: Record<Algorithm, Evaluate> = {
  SLIDING_WINDOW_COUNTER: evaluateSlidingWindowCounter,
  TOKEN_BUCKET: evaluateTokenBucket,
  FIXED_WINDOW: evaluateFixedWindow,
  SLIDING_WINDOW_LOG: evaluateSlidingWindowLog,
  LEAKY_BUCKET: evaluateLeakyBucket,
  CONCURRENCY: evaluateConcurrency,
};

/** What the algorithms need of a rule: its window in milliseconds, and its capacity (burst where the algorithm has one). */
export function limitParamsOf(rule: Pick<RuleSpec, "algorithm" | "limit" | "window" | "windowUnit" | "burst" | "action"> & Partial<Pick<RuleSpec, "reach" | "calendar">>): LimitParams {
  const calendar = rule.calendar ?? null;
  const params: LimitParams = {
    algorithm: rule.algorithm,
    limit: rule.limit,
    windowMs: calendar === null ? windowSecondsOf(rule.window, rule.windowUnit) * 1000 : LONGEST_PERIOD_MS[calendar.period],
    capacity: capacityOf(rule),
    action: rule.action,
    ...(calendar === null ? {} : { calendar }),
  };
  return rule.reach === "GLOBAL" ? { ...params, reach: "GLOBAL" } : params;
}

export function evaluate(state: CounterState | undefined, nowMs: number, params: LimitParams, cost: number, elsewhere?: readonly CounterState[]): Evaluation {
  return EVALUATORS[params.algorithm](state, nowMs, params, cost, elsewhere);
}

/**
 * Until when a stored state can still change a decision; after that it is as
 * good as absent and a store may drop it. Stores use this to collect garbage
 * only: every state says by itself when it stops counting, so a store that
 * keeps a state longer decides exactly alike.
 */
export function stateExpiresAt(state: CounterState, nowMs: number, params: LimitParams): number {
  switch (params.algorithm) {
    case "FIXED_WINDOW":
      return nowMs + fixedWindowHorizonMs(params.windowMs);
    case "SLIDING_WINDOW_COUNTER":
      return nowMs + slidingWindowCounterHorizonMs(params.windowMs);
    case "TOKEN_BUCKET":
    case "LEAKY_BUCKET":
      return meterExpiresAt(state);
    case "SLIDING_WINDOW_LOG":
      return slidingWindowLogExpiresAt(state, nowMs, params.windowMs);
    case "CONCURRENCY":
      return concurrencyExpiresAt(state, nowMs);
  }
}

/** One rule's part in a decided request. */
export interface BucketOutcome {
  conforming: boolean;
  remaining: number;
  resetAtMs: number;
  retryAfterMs: number | null;
  delayMs: number;
}

export interface CombinedDecision {
  allowed: boolean;
  outcomes: BucketOutcome[];
  /** Which buckets take the request's units: only when it is allowed, not a dry run, and the rule conforms. */
  consumes: boolean[];
}

/**
 * The request is allowed only if every enforcing rule conforms (LOG_ONLY rules
 * never deny). Then each conforming rule counts it; a shadow rule that would
 * have refused counts nothing, exactly as if it were enforced alone. When the
 * request is denied nothing is counted anywhere, and every rule reports its
 * bucket as it stands. `refusedElsewhere` says that a rule decided outside
 * these buckets already refuses the request.
 */
export function combine(
  evaluations: readonly Pick<Evaluation, "verdict">[],
  actions: readonly Action[],
  dryRun: boolean,
  refusedElsewhere = false,
): CombinedDecision {
  const allowed = !refusedElsewhere && evaluations.every((e, i) => e.verdict.conforming || actions[i] === "LOG_ONLY");
  const outcomes = evaluations.map(({ verdict }) => {
    const counted = allowed && verdict.conforming;
    const usage = counted ? verdict.ifAdmitted : verdict.current;
    return {
      conforming: verdict.conforming,
      remaining: usage.remaining,
      resetAtMs: usage.resetAtMs,
      retryAfterMs: verdict.retryAfterMs,
      delayMs: counted ? verdict.delayMs : 0,
    };
  });
  const consumes = evaluations.map((e) => allowed && !dryRun && e.verdict.conforming);
  return { allowed, outcomes, consumes };
}
