/** What an operator needs to know at a glance (the dashboard's banner, the `health` query): is the service deciding on what it should? */

import type { BreakerState } from "./circuit-breaker.js";

export interface Health {
  /** Some shard's breaker is not closed: checks whose buckets live there are decided by each rule's failureMode. */
  degraded: boolean;
  breakers: { shard: string; state: BreakerState }[];
  rules: {
    /** "database", or "snapshot" while the rule database could not be read at start; null before the first load. */
    source: "database" | "snapshot" | null;
    count: number;
    loadedAt: Date | null;
  };
  /** Instances that reported usage within the last three flush intervals (this one included); null when not known (usage counting off, or the store unreachable). */
  instances: number | null;
}
