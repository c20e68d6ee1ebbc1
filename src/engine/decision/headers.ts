/**
 * The HTTP headers a backend sends with its response, from the deciding rule:
 *   X-RateLimit-Limit / -Remaining / -Reset (unix seconds), Retry-After on deny,
 * and the IETF fields of draft-ietf-httpapi-ratelimit-headers, one item per
 * enforcing rule, most restrictive first:
 *   RateLimit-Policy: "per-user";q=5;w=60, "per-ip";q=100;w=60
 *   RateLimit: "per-user";r=0;t=42, "per-ip";r=95;t=42
 * LOG_ONLY rules never show: shadow mode is invisible to clients.
 */

import type { HttpHeader, RuleResult } from "../../domain/decision.js";
import type { CompiledRule } from "./compiled-rule.js";

export interface HeaderInput {
  allowed: boolean;
  nowMs: number;
  retryAfter: number | null;
  /** Enforcing results, most restrictive first, each with its compiled rule and its bucket's RateLimit-Policy item (an override's, where one applies). */
  enforcing: readonly { result: RuleResult; compiled: CompiledRule; policyItem: string }[];
}

export function rateLimitHeaders({ allowed, nowMs, retryAfter, enforcing }: HeaderInput): HttpHeader[] {
  const deciding = enforcing[0];
  if (deciding === undefined) return [];
  const { result } = deciding;
  const headers: HttpHeader[] = [
    { name: "X-RateLimit-Limit", value: String(result.limit) },
    { name: "X-RateLimit-Remaining", value: String(result.remaining) },
    { name: "X-RateLimit-Reset", value: String(Math.ceil(result.resetAt.getTime() / 1000)) },
  ];
  if (!allowed && retryAfter !== null) headers.push({ name: "Retry-After", value: String(retryAfter) });
  headers.push(
    {
      name: "RateLimit-Policy",
      value: enforcing.map(({ policyItem }) => policyItem).join(", "),
    },
    {
      name: "RateLimit",
      value: enforcing
        .map(({ result: r, compiled: c }) => `${c.policyName};r=${r.remaining};t=${secondsUntil(r.resetAt.getTime(), nowMs)}`)
        .join(", "),
    },
  );
  return headers;
}

export function secondsUntil(atMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((atMs - nowMs) / 1000));
}
