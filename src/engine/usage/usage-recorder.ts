/**
 * Counts this instance's decisions per rule, tenant and minute, and each
 * refused bucket's refusals, in memory, and adds them to the usage store every
 * `flushMs`: a check pays a few map lookups and an increment, never a round
 * trip, and the store's cost is one pipeline per flush whatever the traffic
 * (one even without traffic: it tells the store this instance is alive).
 *
 * Memory stays bounded between two flushes: rules and tenants are those that
 * decided (rules are bounded by MAX_RULES_PER_TENANT, tenants by the requests
 * of one flush interval), and at most MAX_TRACKED_BUCKETS buckets are counted
 * one by one; the refusals of further buckets are counted per tenant and rule
 * under OTHER_BUCKETS, so the totals stay exact. A flush that fails (the store
 * is down) is dropped, not retried: usage is for watching, and a dashboard
 * showing a gap is honest; holding the counts would grow memory for as long
 * as the store stays down.
 */

import type { Clock, UsageStore } from "../../domain/ports.js";
import { MAX_TRACKED_BUCKETS, minuteOf, noUsage, OTHER_BUCKETS, type BucketMinute, type RuleMinute, type UsageCounts, type UsageOutcome } from "../../domain/usage.js";

interface MinuteCounts {
  minuteMs: number;
  /** Rule id, then request tenant. */
  rules: Map<string, Map<string, UsageCounts>>;
  /** Request tenant, then rule id, then bucket key: refusals. */
  buckets: Map<string, Map<string, Map<string, number>>>;
  trackedBuckets: number;
}

export interface UsageRecorderOptions {
  store: UsageStore;
  clock: Clock;
  instanceId: string;
  flushMs: number;
  onFlushFailed?: (error: unknown) => void;
}

export class UsageRecorder {
  private current: MinuteCounts | null = null;
  /** Minutes that ended since the last flush. */
  private ended: MinuteCounts[] = [];
  private flushing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: UsageRecorderOptions) {
    this.timer = setInterval(() => void this.flush(), options.flushMs).unref();
  }

  /** One rule's part in one decision, made at `atMs` for a request of `tenantId`. */
  count(tenantId: string, ruleId: string, key: string, outcome: UsageOutcome, atMs: number): void {
    const minute = this.minuteOf(atMs);
    let byTenant = minute.rules.get(ruleId);
    if (byTenant === undefined) minute.rules.set(ruleId, (byTenant = new Map()));
    let counts = byTenant.get(tenantId);
    if (counts === undefined) byTenant.set(tenantId, (counts = noUsage()));
    counts[outcome]++;
    if (outcome !== "allowed") this.countRefusal(minute, tenantId, ruleId, key);
  }

  /**
   * Adds what was counted to the store (at once, not waiting for the timer:
   * tests and shutdown call it). A flush already under way is waited for, and
   * then this one runs, so that whatever was counted before the call is in the
   * store when it resolves.
   */
  async flush(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
    const minutes = this.ended.splice(0);
    if (this.current !== null) minutes.push(this.current);
    this.current = null;
    // Sent even when empty: a batch is also how the store counts the instances alive.
    this.flushing = this.options.store
      .add({ instanceId: this.options.instanceId, atMs: this.options.clock.now(), rules: minutes.flatMap(ruleMinutes), buckets: minutes.flatMap(bucketMinutes) })
      .catch((error: unknown) => this.options.onFlushFailed?.(error))
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private minuteOf(atMs: number): MinuteCounts {
    const minuteMs = minuteOf(atMs);
    const current = this.current;
    if (current !== null && current.minuteMs === minuteMs) return current;
    if (current !== null) this.ended.push(current);
    this.current = { minuteMs, rules: new Map(), buckets: new Map(), trackedBuckets: 0 };
    return this.current;
  }

  private countRefusal(minute: MinuteCounts, tenantId: string, ruleId: string, key: string): void {
    let byRule = minute.buckets.get(tenantId);
    if (byRule === undefined) minute.buckets.set(tenantId, (byRule = new Map()));
    let byKey = byRule.get(ruleId);
    if (byKey === undefined) byRule.set(ruleId, (byKey = new Map()));
    const refusals = byKey.get(key);
    if (refusals !== undefined) return void byKey.set(key, refusals + 1);
    if (minute.trackedBuckets >= MAX_TRACKED_BUCKETS) return void byKey.set(OTHER_BUCKETS, (byKey.get(OTHER_BUCKETS) ?? 0) + 1);
    minute.trackedBuckets++;
    byKey.set(key, 1);
  }
}

function ruleMinutes({ minuteMs, rules }: MinuteCounts): RuleMinute[] {
  return [...rules].flatMap(([ruleId, byTenant]) => [...byTenant].map(([tenantId, counts]) => ({ ruleId, tenantId, minuteMs, counts })));
}

function bucketMinutes({ minuteMs, buckets }: MinuteCounts): BucketMinute[] {
  return [...buckets].flatMap(([tenantId, byRule]) =>
    [...byRule].flatMap(([ruleId, byKey]) => [...byKey].map(([key, refusals]) => ({ tenantId, ruleId, key, minuteMs, refusals }))),
  );
}
