/**
 * The decision: for each request, find the rules that apply, send them to the
 * counter store as one atomic call, and turn the store's outcomes into a
 * Decision with its most restrictive rule, every rule's result and the
 * headers. Denials (and shadow denials) are published as throttle events,
 * admissions that leave a bucket nearly spent as near-limit events.
 * A request with a bucket the over-limit cache knows to be over its limit is
 * refused here, without the store (a dry run always asks the store: it is
 * how a tool learns what a bucket really holds). Before any of that, the
 * screens (access lists, bans: domain/screening.ts) may decide a request
 * outright from memory; then no rule is matched and no counter touched.
 *
 * A request admitted by CONCURRENCY rules holds a lease in their buckets
 * (domain/lease.ts), which the decision hands out and releaseLease takes
 * back. Checks decided together (Envoy's descriptors) skip CONCURRENCY
 * rules: Envoy's protocol has no way to say a request has ended, so a slot
 * taken there would be held for its whole window, a concurrency limit
 * turned into an unreleased rate limit.
 *
 * Two clocks meet here: the store's (Redis TIME with Redis), which stamps
 * every reply and every resetAt in it, and this instance's, which times the
 * over-limit cache's entries. A duration is only ever the difference of two
 * times of one clock.
 */

import { randomUUID } from "node:crypto";
import { authorize, may, type Principal } from "../../domain/access.js";
import type { BucketOutcome, LimitParams } from "../../domain/algorithms/index.js";
import type { Override } from "../../domain/override.js";
import { isNearLimit, retryAfterOf, type Decision, type DecisionSource, type RuleResult } from "../../domain/decision.js";
import type { LimitEvent } from "../../domain/events.js";
import { decodeLease, encodeLease, memberOf, type Lease, type LeasedBucket } from "../../domain/lease.js";
import { rank, type Rankable } from "../../domain/most-restrictive.js";
import type { BucketRef, Clock, CounterCall, CounterReply, CounterStore, EventBus } from "../../domain/ports.js";
import type { CheckRequest } from "../../domain/request.js";
import { screenRequest, type RequestScreen, type Screening } from "../../domain/screening.js";
import { policyItemOf, type CompiledRule } from "./compiled-rule.js";
import { moreQuotaInMs, rateLimitHeaders, secondsUntil, type ServiceLimit } from "./headers.js";
import type { CachedRefusal, OverLimitCache } from "./over-limit-cache.js";
import { ALL_TENANTS } from "../../domain/rule.js";
import type { RuleBook } from "./rule-book.js";
import { noTelemetry, type Telemetry } from "../../domain/telemetry.js";
import type { UsageRecorder } from "../usage/usage-recorder.js";
import type { RefusalListener } from "../bans/auto-banner.js";

export interface LimiterOptions {
  telemetry?: Telemetry;
  /** Absent: every request goes to the store. */
  overLimit?: OverLimitCache;
  /** Counts every rule's verdicts for the usage charts; absent: not counted. */
  usage?: UsageRecorder;
  /** Asked in this order before any rule (see domain/screening.ts); absent: none. */
  screens?: readonly RequestScreen[];
  /** Draws the holder of each check's CONCURRENCY lease (domain/lease.ts); absent: a random UUID. Tests pin it. */
  leaseHolder?: () => string;
  /** Told of every enforcing rule's refusal of a request that is not a dry run, unless degraded (a failure mode's refusal is no caller's doing): rules' autoBan (engine/bans/auto-banner.ts); absent: nobody. */
  refusals?: RefusalListener;
}

interface Applicable {
  compiled: CompiledRule;
  key: string;
  /** The rule's, or the override's that applies to this bucket. */
  params: LimitParams;
  override: Override | null;
  /** How long from the check until the override ends (by this instance's clock, which tells when it applies); null: it does not end, or there is none. */
  overrideEndsInMs: number | null;
}

interface Ranked extends Rankable {
  result: RuleResult;
  compiled: CompiledRule;
  /** The bucket's own: its rule's, or its override's. */
  params: LimitParams;
  /** How long from the decision until the bucket is whole again, on one clock. */
  resetInMs: number;
}

/** One bucket as the decision knows it. */
interface Reading {
  outcome: BucketOutcome;
  /** False: the over-limit cache refused on another bucket's account and did not read this one. */
  consulted: boolean;
  /** When the store read it, by the store's clock; null: the store did not. */
  readAtMs: number | null;
  /** How long from the decision until outcome.resetAtMs, measured on one clock. */
  resetInMs: number;
}

/** How a decision was reached, beside what each bucket said. */
interface Reached {
  allowed: boolean;
  degraded: boolean;
  decidedAtMs: number;
  source: DecisionSource;
  /** The tenant and holder of the lease the CONCURRENCY buckets take if admitted; null: the request takes none (no such bucket, a dry run). */
  lease: { tenantId: string; holder: string } | null;
}

/**
 * One request's way to its decision: a screen decides it, no rule applies, the over-limit cache
 * refuses it, or the store decides. `partsOf`: for a request made of several
 * checks (checkTogether), which of the applicable buckets each check has;
 * null for a single check.
 */
type Plan = { partsOf: number[][] | null } & (
  | { kind: "screened"; screening: Screening }
  | { kind: "no-rule" }
  | { kind: "refused-locally"; applicable: Applicable[]; readings: Reading[]; decidedAtMs: number }
  | { kind: "store"; applicable: Applicable[]; call: number; lease: Reached["lease"] }
);

export interface CheckOptions {
  /** How long the caller waits for the decisions, in milliseconds (see DecideOptions.budgetMs). */
  budgetMs?: number;
}

/** The decision of a request made of several checks, and each check's own part of it, in order. */
export interface JointDecision {
  decision: Decision;
  parts: Decision[];
}

const NO_RULE: Omit<Decision, "decidedAt" | "degraded"> = Object.freeze({
  allowed: true,
  source: null,
  reason: null,
  rule: null,
  action: null,
  limit: null,
  remaining: null,
  resetAt: null,
  retryAfter: null,
  retryAfterMs: null,
  delayMs: null,
  nearLimit: false,
  results: [],
  headers: [],
});

export class Limiter {
  constructor(
    private readonly rules: RuleBook,
    private readonly store: CounterStore,
    /** Null: decisions publish no events (Floodgate's own admin limit, see MutationLimiter). */
    private readonly events: EventBus | null,
    private readonly clock: Clock,
    private readonly options: LimiterOptions = {},
  ) {}

  /** Decides each request; all are authorized first, so a forbidden one fails the lot before anything is counted. */
  async check(principal: Principal, requests: readonly CheckRequest[], options: CheckOptions = {}): Promise<Decision[]> {
    const decided = await this.decideRequests(
      principal,
      requests.map((request) => [request]),
      options,
      false,
    );
    return decided.map(({ decision }) => decision);
  }

  /**
   * Decides several checks of one tenant as one request (the descriptors of
   * an Envoy rate limit request): the buckets of all their rules go to the
   * store as one atomic call, a bucket two checks share counted once, so that
   * a refusal by any check consumes nothing from the others. The checks carry
   * the same cost and dryRun (the caller makes them agree). Events and metrics
   * are the request's; each part reports its own rules' results.
   */
  async checkTogether(principal: Principal, checks: readonly CheckRequest[], options: CheckOptions = {}): Promise<JointDecision> {
    const [decided] = await this.decideRequests(principal, [checks], options, true);
    return decided!;
  }

  /** `joint`: each request's checks are reported part by part (for a single check: no parts). */
  private async decideRequests(principal: Principal, requests: readonly (readonly CheckRequest[])[], options: CheckOptions, joint: boolean): Promise<JointDecision[]> {
    for (const checks of requests) for (const check of checks) authorize(principal, "checkLimits", check.tenantId);
    const started = performance.now();
    const sentAtMs = this.clock.now();
    const calls: CounterCall[] = [];
    const plans = requests.map((checks): Plan => {
      const screening = screenRequest(this.options.screens ?? [], checks, sentAtMs);
      if (screening !== null) return { kind: "screened", screening, partsOf: joint ? [] : null };
      const { applicable, partsOf } = this.applicableTo(checks, joint, sentAtMs);
      if (applicable.length === 0) return { kind: "no-rule", partsOf };
      const { cost, dryRun, tenantId } = checks[0]!;
      const buckets = applicable.map(
        ({ compiled, key, params }): BucketRef => ({ ruleId: compiled.rule.id, key, params, failureMode: compiled.rule.failureMode }),
      );
      const readings = dryRun ? null : this.refusedLocally(buckets, cost, sentAtMs);
      if (readings !== null) return { kind: "refused-locally", applicable, partsOf, readings, decidedAtMs: sentAtMs };
      const holder = buckets.some(isConcurrency) ? (this.options.leaseHolder ?? randomUUID)() : null;
      calls.push(holder === null ? { buckets, cost, dryRun } : { buckets, cost, dryRun, lease: memberOf(tenantId, holder) });
      return { kind: "store", applicable, partsOf, call: calls.length - 1, lease: holder === null || dryRun ? null : { tenantId, holder } };
    });
    const replies = calls.length === 0 ? [] : await this.store.decide(calls, options);
    const decided = plans.map((plan, i): JointDecision => {
      const checks = requests[i]!;
      if (plan.kind === "screened") {
        const screened = screenedDecision(plan.screening, sentAtMs);
        return { decision: screened, parts: plan.partsOf === null ? [] : checks.map(() => screened) };
      }
      if (plan.kind === "no-rule") {
        const none: Decision = { ...NO_RULE, degraded: false, decidedAt: new Date(this.clock.now()) };
        return { decision: none, parts: plan.partsOf === null ? [] : checks.map(() => none) };
      }
      let readings: Reading[];
      let reached: Reached;
      if (plan.kind === "refused-locally") {
        readings = plan.readings;
        reached = { allowed: false, degraded: false, decidedAtMs: plan.decidedAtMs, source: "OVER_LIMIT_CACHE", lease: null };
      } else {
        const reply = replies[plan.call]!;
        const degraded = reply.degraded ?? false;
        // A degraded reply is a failure mode's answer, not the store's knowledge: never remembered.
        if (!degraded) this.learn(calls[plan.call]!, reply, sentAtMs);
        readings = reply.outcomes.map(
          (outcome): Reading => ({ outcome, consulted: true, readAtMs: degraded ? null : reply.nowMs, resetInMs: outcome.resetAtMs - reply.nowMs }),
        );
        reached = { allowed: reply.allowed, degraded, decidedAtMs: reply.nowMs, source: "COUNTER_STORE", lease: plan.lease };
      }
      const decision = this.decision(plan.applicable, readings, reached);
      if (!checks[0]!.dryRun) {
        const subject = eventSubject(checks);
        this.publishEvents(subject, decision);
        this.countUsage(subject, decision);
        this.tellRefusals(subject, decision);
      }
      this.report(decision);
      const parts = plan.partsOf === null ? [] : plan.partsOf.map((own) => this.part(plan.applicable, own, readings, reached));
      return { decision, parts };
    });
    this.telemetry.checked((performance.now() - started) / 1000, requests.length);
    return decided;
  }

  /**
   * Frees a lease a decision handed out, in every bucket it holds a slot in.
   * True when any still held it; false when none did (released already,
   * expired, reset) and for an id of a tenant the key may not check, which
   * is answered exactly like one no bucket holds. Only an id that is no
   * lease id at all is an error.
   *
   * An id is the caller's text, not a record of what was leased: only the
   * buckets of CONCURRENCY rules this instance knows, of the lease's tenant
   * or "*", one per rule (a check takes one key of each), reach the store,
   * so a made-up id costs the store no more than a real one could.
   */
  async releaseLease(principal: Principal, id: string): Promise<boolean> {
    authorize(principal, "checkLimits", principal.tenantId);
    const claim = decodeLease(id, "id");
    if (!may(principal, "checkLimits", claim.tenantId)) return false;
    const leased = new Map<string, LeasedBucket>();
    for (const bucket of claim.buckets) {
      const rule = this.rules.get(bucket.ruleId);
      const leasable = rule !== null && rule.algorithm === "CONCURRENCY" && (rule.tenantId === claim.tenantId || rule.tenantId === ALL_TENANTS);
      if (leasable && !leased.has(bucket.ruleId)) leased.set(bucket.ruleId, bucket);
    }
    if (leased.size === 0) return false;
    return this.store.releaseLease(memberOf(claim.tenantId, claim.holder), [...leased.values()]);
  }

  /** One check's part of a joint decision: its own buckets' readings, allowed only if the whole request is. */
  private part(applicable: readonly Applicable[], own: readonly number[], readings: readonly Reading[], reached: Reached): Decision {
    if (own.length === 0) return { ...NO_RULE, allowed: reached.allowed, degraded: reached.degraded, decidedAt: new Date(reached.decidedAtMs) };
    return this.decision(
      own.map((i) => applicable[i]!),
      own.map((i) => readings[i]!),
      reached,
    );
  }

  private get telemetry(): Telemetry {
    return this.options.telemetry ?? noTelemetry;
  }

  private report(decision: Decision): void {
    for (const { rule, allowed } of decision.results) {
      const outcome = decision.degraded ? "degraded" : allowed ? "allowed" : rule.action === "LOG_ONLY" ? "shadow" : "denied";
      this.telemetry.ruleDecided(rule.tenantId, rule.id, outcome);
    }
  }

  /**
   * Each rule's own verdict: a rule that conformed counts as allowed even when
   * another rule refused the request. A rule the over-limit cache did not
   * consult (another rule refused first, from memory) has no verdict and
   * counts nothing.
   */
  private countUsage(request: CheckRequest, decision: Decision): void {
    const usage = this.options.usage;
    if (!usage) return;
    const atMs = decision.decidedAt.getTime();
    for (const { rule, key, allowed, consulted } of decision.results) {
      if (consulted) usage.count(request.tenantId, rule.id, key, allowed ? "allowed" : rule.action === "LOG_ONLY" ? "shadowRefused" : "refused", atMs);
    }
  }

  private tellRefusals(request: CheckRequest, decision: Decision): void {
    const listener = this.options.refusals;
    if (!listener || decision.allowed || decision.degraded) return;
    for (const result of decision.results) if (!result.allowed && result.rule.action !== "LOG_ONLY") listener.refused(request.tenantId, result);
  }

  /**
   * The buckets as the over-limit cache knows them, when it knows an
   * enforcing bucket of the request to be over its limit: those refuse, as
   * the store read them; the others are not consulted. Null when the store
   * must decide.
   */
  private refusedLocally(buckets: readonly BucketRef[], cost: number, nowMs: number): Reading[] | null {
    const cache = this.options.overLimit;
    if (!cache) return null;
    const refusals = buckets.map((bucket) => cache.refusal(bucket, cost, nowMs));
    if (refusals.every((refusal) => refusal === null)) return null;
    return buckets.map(({ params }, i) => cachedReading(refusals[i]!, params.capacity, nowMs));
  }

  private learn(call: CounterCall, reply: CounterReply, sentAtMs: number): void {
    const cache = this.options.overLimit;
    if (cache) reply.outcomes.forEach((outcome, i) => cache.remember(call.buckets[i]!, call.cost, outcome, sentAtMs, reply.nowMs));
  }

  /**
   * The buckets that apply to a request's checks, each bucket once, and for a
   * request of several checks the buckets of each (by index).
   */
  private applicableTo(checks: readonly CheckRequest[], joint: boolean, nowMs: number): { applicable: Applicable[]; partsOf: number[][] | null } {
    if (!joint) return { applicable: this.applicable(checks[0]!, nowMs), partsOf: null };
    const applicable: Applicable[] = [];
    const indexOf = new Map<string, number>();
    const partsOf = checks.map((check) =>
      // Checks decided together skip CONCURRENCY rules: nothing could release their leases (see the header).
      this.applicable(check, nowMs).filter((bucket) => bucket.params.algorithm !== "CONCURRENCY").map((bucket) => {
        const id = `${bucket.compiled.rule.id}\u0000${bucket.key}`;
        let index = indexOf.get(id);
        if (index === undefined) {
          index = applicable.push(bucket) - 1;
          indexOf.set(id, index);
        }
        return index;
      }),
    );
    return { applicable, partsOf };
  }

  private applicable(request: CheckRequest, nowMs: number): Applicable[] {
    const applicable: Applicable[] = [];
    for (const compiled of this.rules.match(request)) {
      const key = compiled.keyOf(request);
      if (key === null) continue;
      const overridden = this.rules.overrideFor(compiled, request, nowMs);
      const expiresAt = overridden?.override.expiresAt ?? null;
      applicable.push({
        compiled,
        key,
        params: overridden?.params ?? compiled.params,
        override: overridden?.override ?? null,
        overrideEndsInMs: expiresAt === null ? null : expiresAt.getTime() - nowMs,
      });
    }
    return applicable;
  }

  private decision(applicable: readonly Applicable[], readings: readonly Reading[], { allowed, degraded, decidedAtMs, source, lease }: Reached): Decision {
    // One Date for the decision's instant, shared by every result read then (all of them, from the store): a
    // Date is made by a call into V8's C++ (35 ns in a loop here), and a check of three rules made seven.
    // Nothing changes a decision's Dates once made.
    const decidedAt = new Date(decidedAtMs);
    const unranked: Ranked[] = applicable.map(({ compiled, key, params, override, overrideEndsInMs }, i) => {
      const { outcome, consulted, readAtMs, resetInMs } = readings[i]!;
      // A bucket refused under an override may conform once the override ends and the rule's own limit applies
      // again: a retry is worth making then, and a cache of the refusal (the client's) must not outlive it.
      const wait = outcome.retryAfterMs === null || overrideEndsInMs === null ? outcome.retryAfterMs : Math.min(outcome.retryAfterMs, overrideEndsInMs);
      // Whole milliseconds, never 0 for a refusal: a wait that has not ended is at least one.
      const retryAfterMs = wait === null ? null : Math.max(1, Math.ceil(wait));
      return {
        compiled,
        params,
        resetInMs,
        retryAfterMs,
        result: {
          rule: compiled.rule,
          key,
          override,
          allowed: outcome.conforming,
          limit: params.capacity,
          remaining: outcome.remaining,
          resetAt: new Date(outcome.resetAtMs),
          retryAfter: retryAfterOf(retryAfterMs),
          retryAfterMs,
          delayMs: outcome.delayMs,
          consulted,
          readAt: readAtMs === null ? null : readAtMs === decidedAtMs ? decidedAt : new Date(readAtMs),
          nearLimit: isNearLimit(outcome.conforming, outcome.remaining, params.capacity),
        },
      };
    });
    const {
      ranked,
      enforcing,
      deciding: { result: deciding },
    } = rank(unranked);
    let delayMs: number | null = null;
    for (const r of ranked) if (r.compiled.rule.action === "THROTTLE") delayMs = Math.max(delayMs ?? 0, r.result.delayMs);
    const policies: { key: string; policyItem: string }[] = [];
    for (const { compiled, key, params, override } of applicable) {
      if (compiled.rule.action !== "LOG_ONLY") policies.push({ key, policyItem: override === null ? compiled.policyItem : policyItemOf(compiled.policyName, params) });
    }
    const retryAfter = allowed ? null : deciding.retryAfter;
    const retryAfterMs = allowed ? null : deciding.retryAfterMs;
    const granted = allowed && lease !== null ? grantedLease(applicable, readings, lease, decidedAtMs) : null;
    const decision: Decision = {
      allowed,
      degraded,
      decidedAt,
      source,
      reason: null,
      rule: deciding.rule,
      action: deciding.rule.action,
      limit: deciding.limit,
      remaining: deciding.remaining,
      resetAt: deciding.resetAt,
      retryAfter,
      retryAfterMs,
      delayMs: allowed ? delayMs : null,
      nearLimit: allowed && enforcing.some((r) => r.result.nearLimit),
      results: ranked.map((r) => r.result),
      headers: rateLimitHeaders({
        allowed,
        retryAfter,
        deciding: enforcing[0]?.result ?? null,
        policies,
        limits: enforcing.map(serviceLimit),
      }),
    };
    // Added after, not spread in first: a literal that starts with a spread keeps most of its fields outside the object, slower to read for every decision.
    if (granted !== null) decision.lease = granted;
    return decision;
  }

  private publishEvents(request: CheckRequest, decision: Decision): void {
    if (this.events === null) return;
    const at = decision.decidedAt;
    for (const result of decision.results) {
      if (!result.allowed) void this.events.publish("throttle", { ...eventBase(request, result, at), retryAfter: result.retryAfter });
      else if (decision.allowed && result.nearLimit) void this.events.publish("nearLimit", { ...eventBase(request, result, at), remaining: result.remaining });
    }
  }
}

function isConcurrency(bucket: BucketRef): boolean {
  return bucket.params.algorithm === "CONCURRENCY";
}

/**
 * The lease of an admitted request: the CONCURRENCY buckets that took a slot
 * (a LOG_ONLY one that would have refused took none), expiring with the
 * shortest of their windows; null when none did.
 */
function grantedLease(applicable: readonly Applicable[], readings: readonly Reading[], { tenantId, holder }: { tenantId: string; holder: string }, decidedAtMs: number): Lease | null {
  const held = applicable.filter(({ params }, i) => params.algorithm === "CONCURRENCY" && readings[i]!.outcome.conforming);
  if (held.length === 0) return null;
  const buckets = held.map(({ compiled, key }): LeasedBucket => ({ ruleId: compiled.rule.id, key }));
  return { id: encodeLease({ tenantId, holder, buckets }), expiresAt: new Date(decidedAtMs + Math.min(...held.map(({ params }) => params.windowMs))) };
}

/**
 * A bucket of a request the over-limit cache refuses: the refusal it holds,
 * or, for a bucket it did not read, "not counted against" (the limit left,
 * and nothing to wait for).
 */
function cachedReading(refusal: CachedRefusal | null, capacity: number, nowMs: number): Reading {
  if (refusal === null) {
    return { outcome: { conforming: true, remaining: capacity, resetAtMs: nowMs, retryAfterMs: null, delayMs: 0 }, consulted: false, readAtMs: null, resetInMs: 0 };
  }
  return { outcome: refusal.outcome, consulted: true, readAtMs: refusal.readAtMs, resetInMs: refusal.resetInMs };
}

/**
 * A read rule's RateLimit item: a refusing rule's t is how long until this
 * request would conform, an admitting one's how long until it has one unit
 * more (see moreQuotaInMs, at the bucket's own rate: an override's where one
 * applies), none when its bucket is whole (see headers.ts).
 */
function serviceLimit({ compiled, params, result, resetInMs }: Ranked): ServiceLimit {
  let resetSeconds: number | null;
  if (!result.allowed && result.retryAfter !== null) resetSeconds = result.retryAfter;
  else if (result.remaining >= result.limit) resetSeconds = null;
  else resetSeconds = secondsUntil(moreQuotaInMs(params, result.remaining, resetInMs), 0);
  return { compiled, key: result.key, remaining: result.remaining, resetSeconds };
}

/** The request an event tells of: for several checks together, the first resource and method any of them names. */
function eventSubject(checks: readonly CheckRequest[]): CheckRequest {
  const [first] = checks;
  if (checks.length === 1) return first!;
  return { ...first!, resource: checks.find((c) => c.resource !== null)?.resource ?? null, method: checks.find((c) => c.method !== null)?.method ?? null };
}

/** What throttle and near-limit events say alike about one rule's result. */
function eventBase(request: CheckRequest, result: RuleResult, at: Date): LimitEvent {
  return {
    at,
    tenantId: request.tenantId,
    ruleId: result.rule.id,
    ruleName: result.rule.name,
    key: result.key,
    resource: request.resource,
    method: request.method,
    action: result.rule.action,
    limit: result.limit,
    shadow: result.rule.action === "LOG_ONLY",
    count: 1,
  };
}

/**
 * A screen's verdict as a decision: no rule, no counter. A refusal with an
 * end (a ban) says when to retry, in retryAfter, resetAt and Retry-After;
 * one without (a deny list entry) has no retry to offer.
 */
function screenedDecision({ admit, reason }: Screening, nowMs: number): Decision {
  const retryAfterMs = admit || reason.until === null ? null : Math.max(1, reason.until.getTime() - nowMs);
  const retryAfter = retryAfterOf(retryAfterMs);
  return {
    ...NO_RULE,
    allowed: admit,
    degraded: false,
    decidedAt: new Date(nowMs),
    source: "SCREENING",
    reason,
    resetAt: admit ? null : reason.until,
    retryAfter,
    retryAfterMs,
    headers: retryAfter === null ? [] : [{ name: "Retry-After", value: String(retryAfter) }],
  };
}
