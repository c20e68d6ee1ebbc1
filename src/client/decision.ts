/**
 * The decision the client hands back: the LimitDecision its batch query
 * selects (generated from schema.graphql, src/client/operations.graphql),
 * whose `source` also names the two ways the client answers by itself.
 */

import type { ClientDecisionFragment } from "./generated/operations.js";

/**
 * CLIENT_REFUSAL_CACHE  a refusal Floodgate made, remembered for its Retry-After: no request was sent.
 * CLIENT_FAILURE_MODE   Floodgate could not be asked (timeout, unreachable, 5xx): the client's failureMode decided; degraded is true.
 */
export type ClientDecisionSource = "CLIENT_REFUSAL_CACHE" | "CLIENT_FAILURE_MODE";

export type FloodgateDecision = Omit<ClientDecisionFragment, "source"> & {
  source: ClientDecisionFragment["source"] | ClientDecisionSource;
};

export type HttpHeader = FloodgateDecision["headers"][number];

/** Whole seconds until `atMs`, at least 1: what Retry-After says of a wait that has not ended. */
export function retryAfterSeconds(atMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((atMs - nowMs) / 1000));
}

/** A refusal's only header when the client decided without Floodgate's counters: how long to wait. */
export function retryAfterHeaders(retryAfter: number | null): HttpHeader[] {
  return retryAfter === null ? [] : [{ name: "Retry-After", value: String(retryAfter) }];
}

/**
 * A decision made without any rule: OPEN's admission and CLOSED's refusal,
 * and LOCAL's answer when none of the rules it has seen applies. It names no
 * rule, since none was consulted, and CLOSED asks to retry in a second.
 */
export function ruleLessDecision(allowed: boolean, nowMs: number): FloodgateDecision {
  const retryAfter = allowed ? null : 1;
  return {
    allowed,
    degraded: true,
    decidedAt: new Date(nowMs).toISOString(),
    source: "CLIENT_FAILURE_MODE",
    rule: null,
    action: null,
    limit: null,
    remaining: null,
    resetAt: null,
    retryAfter,
    retryAfterMs: allowed ? null : 1000,
    delayMs: null,
    nearLimit: false,
    results: [],
    headers: retryAfterHeaders(retryAfter),
    reason: null,
    lease: null,
  };
}
