/**
 * Usage over time, as the operators' dashboard and tools read it: per rule and
 * per minute, how many checks it admitted, refused, and would have refused
 * (LOG_ONLY); per tenant and per minute, the buckets refused most. Each
 * instance counts its own decisions in memory and adds them to the usage
 * store every few seconds (src/engine/usage/usage-recorder.ts), so a check
 * pays a map increment, never a round trip, and the store holds the sum of
 * every instance's counts.
 */

export const MINUTE_MS = 60_000;

/** How long the store keeps a minute's counts: what `ruleUsage` and `topBuckets` can look back over. */
export const USAGE_RETENTION_MS = 6 * 60 * MINUTE_MS;

/** Buckets one instance counts one by one between two flushes; refusals of further buckets are counted under OTHER_BUCKETS. */
export const MAX_TRACKED_BUCKETS = 10_000;

/** Buckets the store keeps per tenant and minute, the most refused: enough for any top list a dashboard shows. */
export const MAX_STORED_BUCKETS = 1000;

/** The bucket key refusals beyond MAX_TRACKED_BUCKETS are counted under (as events gather them, see docs/events.md). */
export const OTHER_BUCKETS = "(other keys)";

export interface UsageCounts {
  allowed: number;
  /** Refused by an enforcing rule (REJECT, or THROTTLE with its line full). */
  refused: number;
  /** What a LOG_ONLY rule would have refused (the request went through). */
  shadowRefused: number;
}

export type UsageOutcome = keyof UsageCounts;

export function noUsage(): UsageCounts {
  return { allowed: 0, refused: 0, shadowRefused: 0 };
}

/** One rule's counts of one minute, for the request tenant that made them. */
export interface RuleMinute {
  ruleId: string;
  tenantId: string;
  minuteMs: number;
  counts: UsageCounts;
}

/** One bucket's refusals (enforced and shadow) in one minute. */
export interface BucketMinute {
  tenantId: string;
  ruleId: string;
  key: string;
  minuteMs: number;
  refusals: number;
}

/** What one instance counted since its last flush. */
export interface UsageBatch {
  instanceId: string;
  /** When the instance flushed: how the store knows which instances are alive. */
  atMs: number;
  rules: RuleMinute[];
  buckets: BucketMinute[];
}

export interface BucketUsage {
  tenantId: string;
  ruleId: string;
  key: string;
  refusals: number;
}

/** The minute a time falls in, by its start. */
export function minuteOf(ms: number): number {
  return ms - (ms % MINUTE_MS);
}

/** The starts of the minutes from `fromMs`'s to `toMs`'s, both included. */
export function minutesBetween(fromMs: number, toMs: number): number[] {
  const minutes: number[] = [];
  for (let minute = minuteOf(fromMs); minute <= toMs; minute += MINUTE_MS) minutes.push(minute);
  return minutes;
}

/** The most refused first, then by tenant, rule and key, so that equal counts list in a stable order; at most `limit`. */
export function topOf(buckets: Iterable<BucketUsage>, limit: number): BucketUsage[] {
  return [...buckets]
    .sort((a, b) => b.refusals - a.refusals || a.tenantId.localeCompare(b.tenantId) || a.ruleId.localeCompare(b.ruleId) || a.key.localeCompare(b.key))
    .slice(0, limit);
}
