import type { Action, Rule } from "./rule.js";

export interface HttpHeader {
  name: string;
  value: string;
}

/** One rule's verdict on one request. */
export interface RuleResult {
  rule: Rule;
  key: string;
  /** The rule admits the request (for LOG_ONLY: would admit it). */
  allowed: boolean;
  limit: number;
  remaining: number;
  resetAt: Date;
  /** Whole seconds until a request like this one would be admitted; null when admitted. */
  retryAfter: number | null;
  delayMs: number;
  /** The rule admits the request and its bucket has under a tenth of the limit left: see isNearLimit. */
  nearLimit: boolean;
}

export interface Decision {
  allowed: boolean;
  /** The counter store's clock when it decided (Redis TIME with Redis). */
  decidedAt: Date;
  /** The rule that decided: on deny the longest wait, on allow the fewest remaining. */
  rule: Rule | null;
  action: Action | null;
  limit: number | null;
  remaining: number | null;
  resetAt: Date | null;
  retryAfter: number | null;
  delayMs: number | null;
  /** The request went through, but an enforcing rule's bucket is nearly spent (shadow rules, as in the headers, do not count). */
  nearLimit: boolean;
  results: RuleResult[];
  headers: HttpHeader[];
}

/**
 * Envoy's near_limit: the rule admits the request, and its bucket has under
 * 10% of its limit left (limit 100: remaining 9 or fewer; limit 5: remaining
 * 0). A rule that refuses is over its limit, not near it.
 */
export function isNearLimit(conforming: boolean, remaining: number, limit: number): boolean {
  return conforming && remaining * 10 < limit;
}
