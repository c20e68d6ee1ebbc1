/**
 * What this instance's memory hears from the event bus, wired in one place
 * (the composition root calls it): each listener keeps something remembered
 * in step with what any instance, this one included, has just done.
 */

import type { EventBus } from "./domain/ports.js";
import type { ApiKeyService } from "./engine/access/api-key-service.js";
import type { OverLimitCache } from "./engine/decision/over-limit-cache.js";
import type { LeasingCounterStore } from "./store/leasing-counter-store.js";

export interface EventListeners {
  /** The limiter's over-limit cache, when there is one. */
  overLimit?: OverLimitCache;
  keys?: ApiKeyService;
  /** Hot buckets' leases, when LEASE_HOT_CHECKS_PER_SECOND turns them on. */
  leases?: LeasingCounterStore;
}

export function listenToEvents(events: EventBus, { overLimit, keys, leases }: EventListeners): void {
  // A bucket reset through any instance is no longer refused from this one's memory.
  if (overLimit) events.subscribe("bucketReset", (reset) => overLimit.forget(reset.ruleId, reset.key));
  // Nor admitted from a lease whose units the reset took out of the store.
  if (leases) events.subscribe("bucketReset", (reset) => leases.forget(reset.ruleId, reset.key));
  // A key revoked through any instance is refused here at once, though its lookup is still cached.
  if (keys) events.subscribe("keyRevocation", ({ keyId, at }) => keys.forget(keyId, at));
}
