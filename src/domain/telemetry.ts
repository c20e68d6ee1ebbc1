/**
 * What the engine reports for monitoring. The server implements it with
 * Prometheus (src/server/metrics.ts); tests and tools use `noTelemetry`.
 * Labels stay bounded: tenants and rules are named by the rule (its tenant,
 * its id), never by who made the request; breakers by the shards the store
 * has now.
 */

import type { BreakerState } from "./circuit-breaker.js";

export type DecisionOutcome = "allowed" | "denied" | "shadow" | "degraded";

export interface Telemetry {
  /** One rule's part in one decision. */
  ruleDecided(tenantId: string, ruleId: string, outcome: DecisionOutcome): void;
  /** How long a call of the limiter took, for all the checks it carried. */
  checked(seconds: number, checks: number): void;
  /** One round trip to the counter store, and whether it failed (error or deadline). */
  storeCalled(seconds: number, failed: boolean): void;
  /** A shard's circuit breaker (a Redis Cluster master's, by "host:port") is new or changed state. */
  breakerChanged(shard: string, state: BreakerState): void;
  /** A shard is gone from the topology, and so is its breaker. */
  breakerForgotten(shard: string): void;
  subscriptionOpened(): void;
  subscriptionClosed(): void;
  /** Events not delivered to a subscriber that fell too far behind (its subscription is ended). */
  eventsDropped(count: number): void;
  /** A hot bucket's lease taken from the counter store, of `units` units (src/store/leasing-counter-store.ts). */
  leaseTaken(units: number): void;
  /** Units admitted from leases, without a round trip. */
  leaseUsed(units: number): void;
  /** The link to another region went down or came back (src/store/regions). */
  regionLinkChanged(region: string, up: boolean): void;
  /** Buckets' states shipped to another region. */
  regionShipped(region: string, buckets: number): void;
}

export const noTelemetry: Telemetry = {
  ruleDecided: () => undefined,
  checked: () => undefined,
  storeCalled: () => undefined,
  breakerChanged: () => undefined,
  breakerForgotten: () => undefined,
  subscriptionOpened: () => undefined,
  subscriptionClosed: () => undefined,
  eventsDropped: () => undefined,
  leaseTaken: () => undefined,
  leaseUsed: () => undefined,
  regionLinkChanged: () => undefined,
  regionShipped: () => undefined,
};
