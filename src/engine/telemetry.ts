/**
 * What the engine reports for monitoring. The server implements it with
 * Prometheus (src/server/metrics.ts); tests and tools use `noTelemetry`.
 * Labels stay bounded: tenants and rules are named by the rule (its tenant,
 * its id), never by who made the request.
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
  breakerChanged(state: BreakerState): void;
  subscriptionOpened(): void;
  subscriptionClosed(): void;
  /** Events not delivered to a subscriber that fell too far behind (its subscription is ended). */
  eventsDropped(count: number): void;
}

export const noTelemetry: Telemetry = {
  ruleDecided: () => undefined,
  checked: () => undefined,
  storeCalled: () => undefined,
  breakerChanged: () => undefined,
  subscriptionOpened: () => undefined,
  subscriptionClosed: () => undefined,
  eventsDropped: () => undefined,
};
