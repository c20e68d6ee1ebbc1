/**
 * Reading usage: a rule's counts over time and a tenant's most refused
 * buckets, for whoever may watch the tenant's events (VIEWER and up). A key
 * scoped to a tenant sees only its tenant's requests, also in a "*" rule's
 * counts; an ADMIN sees every tenant's.
 */

import { authorize, scopeTenant, type Principal } from "../../domain/access.js";
import { NotFoundError, UnavailableError, ValidationError } from "../../domain/errors.js";
import type { Clock, UsageStore } from "../../domain/ports.js";
import type { Rule } from "../../domain/rule.js";
import { integer } from "../../domain/validation.js";
import { MINUTE_MS, minutesBetween, noUsage, USAGE_RETENTION_MS, type BucketUsage, type UsageCounts } from "../../domain/usage.js";

export interface UsagePoint extends UsageCounts {
  /** The start of the step. */
  at: Date;
}

export interface TopBucket extends BucketUsage {
  /** Null when the rule is gone (or not visible to the caller any more). */
  ruleName: string | null;
}

const DEFAULT_USAGE_LOOKBACK_MS = 60 * MINUTE_MS;
const DEFAULT_TOP_LOOKBACK_MS = 5 * MINUTE_MS;
const DEFAULT_TOP_LIMIT = 10;
const MAX_TOP_LIMIT = 100;
const MAX_STEP_SECONDS = 3600;

export class UsageService {
  constructor(
    private readonly store: UsageStore,
    /** The rule as the caller may see it (null: not there, or not the caller's to see). */
    private readonly findRule: (principal: Principal, id: string) => Rule | null,
    private readonly clock: Clock,
  ) {}

  /** The rule's counts per `stepSeconds` (a whole number of minutes) from `since` to now, oldest first, a step without traffic as zeros. */
  async ruleUsage(principal: Principal, ruleId: string, since: Date | null | undefined, stepSeconds: number | null | undefined): Promise<UsagePoint[]> {
    authorize(principal, "watchEvents", principal.tenantId);
    const step = integer(stepSeconds ?? 60, "step", 60, MAX_STEP_SECONDS);
    if (step % 60 !== 0) throw new ValidationError("step", `must be a whole number of minutes, in seconds (got ${step})`);
    const nowMs = this.clock.now();
    const fromMs = this.since(since, nowMs, DEFAULT_USAGE_LOOKBACK_MS);
    if (this.findRule(principal, ruleId) === null) throw new NotFoundError("rule", ruleId);
    const minutes = minutesBetween(fromMs, nowMs);
    const counts = await unavailableWhenFailing(this.store.ruleUsage(ruleId, principal.role === "ADMIN" ? null : principal.tenantId, minutes));
    const stepMs = step * 1000;
    const points = new Map<number, UsagePoint>();
    minutes.forEach((minuteMs, i) => {
      const startMs = minuteMs - (minuteMs % stepMs);
      let point = points.get(startMs);
      if (point === undefined) points.set(startMs, (point = { at: new Date(startMs), ...noUsage() }));
      point.allowed += counts[i]!.allowed;
      point.refused += counts[i]!.refused;
      point.shadowRefused += counts[i]!.shadowRefused;
    });
    return [...points.values()];
  }

  /** The buckets refused most (enforced and shadow refusals) from `since` to now; an ADMIN naming no tenant sees every tenant's. */
  async topBuckets(principal: Principal, tenantId: string | null, since: Date | null | undefined, limit: number | null | undefined): Promise<TopBucket[]> {
    const tenant = scopeTenant(principal, "watchEvents", tenantId);
    const count = integer(limit ?? DEFAULT_TOP_LIMIT, "limit", 1, MAX_TOP_LIMIT);
    const nowMs = this.clock.now();
    const fromMs = this.since(since, nowMs, DEFAULT_TOP_LOOKBACK_MS);
    const buckets = await unavailableWhenFailing(this.store.topBuckets(tenant, minutesBetween(fromMs, nowMs), count));
    return buckets.map((bucket) => ({ ...bucket, ruleName: this.findRule(principal, bucket.ruleId)?.name ?? null }));
  }

  /** Instances that added usage within the last `withinMs` (their flushes prove them alive). */
  instancesSince(withinMs: number): Promise<number> {
    return this.store.instancesSince(this.clock.now() - withinMs);
  }

  /** A minute of slack each way, so that a caller computing "six hours ago" or "now" on a clock of its own is not refused for it. */
  private since(since: Date | null | undefined, nowMs: number, defaultLookbackMs: number): number {
    if (since === null || since === undefined) return nowMs - defaultLookbackMs;
    const ms = since.getTime();
    const earliestMs = nowMs - USAGE_RETENTION_MS;
    if (ms < earliestMs - MINUTE_MS) {
      throw new ValidationError("since", `must be within the last ${USAGE_RETENTION_MS / MINUTE_MS} minutes, which is how long usage is kept (got ${since.toISOString()})`);
    }
    if (ms > nowMs + MINUTE_MS) throw new ValidationError("since", `must not be in the future (got ${since.toISOString()})`);
    return Math.min(nowMs, Math.max(earliestMs, ms));
  }
}

/** The store failing (Redis unreachable) is the service unavailable for now, not an internal error: SERVICE_UNAVAILABLE, as resetLimit answers then. */
function unavailableWhenFailing<T>(read: Promise<T>): Promise<T> {
  return read.catch((error: unknown) => {
    throw new UnavailableError("usage cannot be read now: the counter store is unreachable", { cause: error });
  });
}
