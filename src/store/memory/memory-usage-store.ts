/**
 * Usage counts in this process: the embedded mode's usage store, where the
 * only instance is this one. It keeps what the Redis store keeps, the same
 * way (a rule's counts per request tenant, each tenant's most refused buckets
 * per minute), so that both answer alike (test/store/usage-store.conformance.ts).
 */

import type { UsageStore } from "../../domain/ports.js";
import { MAX_STORED_BUCKETS, MINUTE_MS, noUsage, topOf, USAGE_RETENTION_MS, type BucketUsage, type UsageBatch, type UsageCounts } from "../../domain/usage.js";

interface Minute {
  /** Rule id, then request tenant. */
  rules: Map<string, Map<string, UsageCounts>>;
  /** Request tenant, then the bucket's rule and key (see bucketMember). */
  buckets: Map<string, Map<string, BucketUsage>>;
}

export class MemoryUsageStore implements UsageStore {
  private readonly minutes = new Map<number, Minute>();
  private readonly instances = new Map<string, number>();

  async add(batch: UsageBatch): Promise<void> {
    this.instances.set(batch.instanceId, batch.atMs);
    for (const { ruleId, tenantId, minuteMs, counts } of batch.rules) {
      const byTenant = getOrAdd(this.minute(minuteMs).rules, ruleId, () => new Map<string, UsageCounts>());
      const total = getOrAdd(byTenant, tenantId, noUsage);
      total.allowed += counts.allowed;
      total.refused += counts.refused;
      total.shadowRefused += counts.shadowRefused;
    }
    const touched = new Set<Map<string, BucketUsage>>();
    for (const { tenantId, ruleId, key, minuteMs, refusals } of batch.buckets) {
      const buckets = getOrAdd(this.minute(minuteMs).buckets, tenantId, () => new Map<string, BucketUsage>());
      getOrAdd(buckets, bucketMember(ruleId, key), () => ({ tenantId, ruleId, key, refusals: 0 })).refusals += refusals;
      touched.add(buckets);
    }
    for (const buckets of touched) keepMostRefused(buckets);
    this.forgetBefore(batch.atMs);
  }

  async ruleUsage(ruleId: string, tenantId: string | null, minutes: readonly number[]): Promise<UsageCounts[]> {
    return minutes.map((minuteMs) => {
      const byTenant = this.minutes.get(minuteMs)?.rules.get(ruleId);
      const sum = noUsage();
      for (const [tenant, counts] of byTenant ?? []) {
        if (tenantId !== null && tenant !== tenantId) continue;
        sum.allowed += counts.allowed;
        sum.refused += counts.refused;
        sum.shadowRefused += counts.shadowRefused;
      }
      return sum;
    });
  }

  async topBuckets(tenantId: string | null, minutes: readonly number[], limit: number): Promise<BucketUsage[]> {
    const sums = new Map<string, BucketUsage>();
    for (const minuteMs of minutes) {
      for (const [tenant, buckets] of this.minutes.get(minuteMs)?.buckets ?? []) {
        if (tenantId !== null && tenant !== tenantId) continue;
        for (const bucket of buckets.values()) {
          getOrAdd(sums, `${tenant}\n${bucketMember(bucket.ruleId, bucket.key)}`, () => ({ ...bucket, refusals: 0 })).refusals += bucket.refusals;
        }
      }
    }
    return topOf(sums.values(), limit);
  }

  async instancesSince(sinceMs: number): Promise<number> {
    let count = 0;
    for (const atMs of this.instances.values()) if (atMs >= sinceMs) count++;
    return count;
  }

  private minute(minuteMs: number): Minute {
    return getOrAdd(this.minutes, minuteMs, () => ({ rules: new Map(), buckets: new Map() }));
  }

  /** What Redis would have let expire by `nowMs`: a minute's keys live USAGE_RETENTION_MS past its end, an instance that long past its last batch. */
  private forgetBefore(nowMs: number): void {
    for (const minuteMs of this.minutes.keys()) if (minuteMs + MINUTE_MS + USAGE_RETENTION_MS < nowMs) this.minutes.delete(minuteMs);
    for (const [instance, atMs] of this.instances) if (atMs < nowMs - USAGE_RETENTION_MS) this.instances.delete(instance);
  }
}

function bucketMember(ruleId: string, key: string): string {
  return JSON.stringify([ruleId, key]);
}

/** Drops all but the MAX_STORED_BUCKETS most refused buckets, as the Redis store trims its sorted sets. */
function keepMostRefused(buckets: Map<string, BucketUsage>): void {
  if (buckets.size <= MAX_STORED_BUCKETS) return;
  const kept = new Set(topOf(buckets.values(), MAX_STORED_BUCKETS));
  for (const [member, bucket] of buckets) if (!kept.has(bucket)) buckets.delete(member);
}

function getOrAdd<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}
