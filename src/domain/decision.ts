import type { Lease } from "./lease.js";
import type { Override } from "./override.js";
import type { Action, Rule } from "./rule.js";
import type { DecisionReason } from "./screening.js";

export interface HttpHeader {
  name: string;
  value: string;
}

/**
 * Who decided: the counter store; this instance's over-limit cache, which
 * refuses a request whose bucket it already knows to be over its limit
 * without asking the store (see engine/decision/over-limit-cache.ts); or
 * this instance's screens, before any rule (see screening.ts).
 */
export const DECISION_SOURCES = ["COUNTER_STORE", "OVER_LIMIT_CACHE", "SCREENING"] as const;
export type DecisionSource = (typeof DECISION_SOURCES)[number];

/** One rule's verdict on one request. */
export interface RuleResult {
  rule: Rule;
  key: string;
  /** The override that gave this bucket its limit; null: the rule's own. */
  override: Override | null;
  /** The rule admits the request (for LOG_ONLY: would admit it). */
  allowed: boolean;
  limit: number;
  remaining: number;
  resetAt: Date;
  /** Whole seconds until a request like this one would be admitted; null when admitted. */
  retryAfter: number | null;
  /** The same wait in milliseconds, as the counter store worked it out (retryAfter is it rounded up to seconds); null when admitted. */
  retryAfterMs: number | null;
  delayMs: number;
  /**
   * False when the bucket was not read: the over-limit cache refused the
   * request on another rule's account. allowed, remaining and resetAt then
   * stand for "not counted against": true, the limit, and the decision's time.
   */
  consulted: boolean;
  /**
   * When the counter store read the bucket, by the store's clock (Redis TIME
   * with Redis): remaining and resetAt are as of then. On an answer of the
   * over-limit cache, when the store read the refusal that filled the cache,
   * not now. Null when the store did not read it: the cache did not consult
   * it, or the decision is degraded (a failure mode's or a cut-off region's).
   */
  readAt: Date | null;
  /** The rule admits the request and its bucket has under a tenth of the limit left: see isNearLimit. */
  nearLimit: boolean;
}

export interface Decision {
  allowed: boolean;
  /** Decided without the counter store, by each rule's failureMode. */
  degraded: boolean;
  /** The counter store's clock when it decided (Redis TIME with Redis); this instance's clock when the over-limit cache or a failure mode did. */
  decidedAt: Date;
  /** Null when no rule applies. */
  source: DecisionSource | null;
  /** Why a screen decided the request before its rules (a list entry, a ban); null when the rules decided. */
  reason: DecisionReason | null;
  /** The rule that decided: on deny the longest wait, on allow the fewest remaining. */
  rule: Rule | null;
  action: Action | null;
  limit: number | null;
  remaining: number | null;
  resetAt: Date | null;
  /** Whole seconds to wait before retrying, as Retry-After says; null when admitted. */
  retryAfter: number | null;
  /** The same wait in milliseconds (retryAfter is it rounded up to seconds); null when admitted. */
  retryAfterMs: number | null;
  delayMs: number | null;
  /** The request went through, but an enforcing rule's bucket is nearly spent (shadow rules, as in the headers, do not count). */
  nearLimit: boolean;
  results: RuleResult[];
  headers: HttpHeader[];
  /** Set when CONCURRENCY rules admitted the request: the slots it holds until releaseLease (domain/lease.ts). */
  lease?: Lease;
}

/**
 * Envoy's near_limit: the rule admits the request, and its bucket has under
 * 10% of its limit left (limit 100: remaining 9 or fewer; limit 5: remaining
 * 0). A rule that refuses is over its limit, not near it.
 */
export function isNearLimit(conforming: boolean, remaining: number, limit: number): boolean {
  return conforming && remaining * 10 < limit;
}

/** A wait's retryAfter (a rule result's, a ban's): its retryAfterMs in whole seconds, rounded up (null: no wait). */
export function retryAfterOf(retryAfterMs: number | null): number | null {
  return retryAfterMs === null ? null : Math.max(0, Math.ceil(retryAfterMs / 1000));
}
