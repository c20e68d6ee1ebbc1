/**
 * Which rule decides a request that several rules apply to. The server's
 * limiter and the client's LOCAL mode both rank with this, so a decision
 * names the same rule (and so the same limit, remaining, Retry-After and
 * headers) whoever made it.
 *
 * Most restrictive first:
 *   1. refusals of enforcing rules, then refusals of LOG_ONLY (shadow) rules,
 *      then admissions;
 *   2. the longest wait for the bucket to admit again;
 *   3. the fewest remaining;
 *   4. the higher priority;
 *   5. the rule id, so that the order never depends on the order the rules
 *      were matched in.
 *
 * The deciding result is the most restrictive enforcing one that was read
 * from the counters (a bucket the over-limit cache refused without the store
 * was not), or, when there is none, the most restrictive of all: a request
 * only shadow rules apply to is described by its shadow rule.
 */

import type { Action } from "./rule.js";

/** What ranking reads of one rule's result. */
export interface Rankable {
  result: { allowed: boolean; remaining: number; consulted: boolean; rule: { id: string; priority: number; action: Action } };
  /** The wait before the bucket admits again, in milliseconds (a result's retryAfter is rounded to seconds, too coarse to rank by). */
  retryAfterMs: number | null;
}

export interface Ranking<T extends Rankable> {
  /** Every result, most restrictive first. */
  ranked: T[];
  /** The results of enforcing rules that were read, most restrictive first: what a decision's headers and nearLimit describe. */
  enforcing: T[];
  deciding: T;
}

/** Ranks one request's results (at least one). */
export function rank<T extends Rankable>(results: readonly T[]): Ranking<T> {
  const ranked = [...results].sort(mostRestrictiveFirst);
  const enforcing = ranked.filter(({ result }) => result.rule.action !== "LOG_ONLY" && result.consulted);
  return { ranked, enforcing, deciding: (enforcing[0] ?? ranked[0])! };
}

export function mostRestrictiveFirst(a: Rankable, b: Rankable): number {
  return (
    standing(a) - standing(b) ||
    (b.retryAfterMs ?? 0) - (a.retryAfterMs ?? 0) ||
    a.result.remaining - b.result.remaining ||
    b.result.rule.priority - a.result.rule.priority ||
    (a.result.rule.id < b.result.rule.id ? -1 : a.result.rule.id > b.result.rule.id ? 1 : 0)
  );
}

/** 0: an enforcing refusal, 1: a shadow refusal, 2: an admission. */
function standing({ result }: Rankable): number {
  if (result.allowed) return 2;
  return result.rule.action === "LOG_ONLY" ? 1 : 0;
}
