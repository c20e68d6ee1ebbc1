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
}

export interface Decision {
  allowed: boolean;
  /** Decided without the counter store, by each rule's failureMode. */
  degraded: boolean;
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
  results: RuleResult[];
  headers: HttpHeader[];
}
