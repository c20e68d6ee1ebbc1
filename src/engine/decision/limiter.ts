/**
 * The decision: for each request, find the rules that apply, send them to the
 * counter store as one atomic call, and turn the store's outcomes into a
 * Decision with its most restrictive rule, every rule's result and the
 * headers. Denials (and shadow denials) are published as throttle events,
 * admissions that leave a bucket nearly spent as near-limit events.
 * A request with a bucket the over-limit cache knows to be over its limit is
 * refused here, without the store.
 */

import { authorize, type Principal } from "../../domain/access.js";
import type { BucketOutcome, LimitParams } from "../../domain/algorithms/index.js";
import type { Override } from "../../domain/override.js";
import { isNearLimit, type Decision, type DecisionSource, type RuleResult } from "../../domain/decision.js";
import type { LimitEvent } from "../../domain/events.js";
import { rank, type Rankable } from "../../domain/most-restrictive.js";
import type { BucketRef, Clock, CounterCall, CounterReply, CounterStore, EventBus } from "../../domain/ports.js";
import type { CheckRequest } from "../../domain/request.js";
import { policyItemOf, type CompiledRule } from "./compiled-rule.js";
import { rateLimitHeaders, secondsUntil } from "./headers.js";
import type { OverLimitCache } from "./over-limit-cache.js";
import type { RuleBook } from "./rule-book.js";
import { noTelemetry, type Telemetry } from "../../domain/telemetry.js";

export interface LimiterOptions {
  telemetry?: Telemetry;
  /** Absent: every request goes to the store. */
  overLimit?: OverLimitCache;
}

interface Applicable {
  compiled: CompiledRule;
  key: string;
  /** The rule's, or the override's that applies to this bucket. */
  params: LimitParams;
  override: Override | null;
}

interface Ranked extends Rankable {
  result: RuleResult;
  compiled: CompiledRule;
  policyItem: string;
}

/** One request's way to its decision: no rule applies, the over-limit cache refuses it, or the store decides. */
type Plan =
  | { kind: "no-rule" }
  | { kind: "refused-locally"; applicable: Applicable[]; reply: CounterReply; consulted: boolean[] }
  | { kind: "store"; applicable: Applicable[]; call: number };

const NO_RULE: Omit<Decision, "decidedAt" | "degraded"> = Object.freeze({
  allowed: true,
  source: null,
  rule: null,
  action: null,
  limit: null,
  remaining: null,
  resetAt: null,
  retryAfter: null,
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
  async check(principal: Principal, requests: readonly CheckRequest[]): Promise<Decision[]> {
    for (const request of requests) authorize(principal, "checkLimits", request.tenantId);
    const started = performance.now();
    const sentAtMs = this.clock.now();
    const calls: CounterCall[] = [];
    const plans = requests.map((request): Plan => {
      const applicable = this.applicable(request, sentAtMs);
      if (applicable.length === 0) return { kind: "no-rule" };
      const buckets = applicable.map(
        ({ compiled, key, params }): BucketRef => ({ ruleId: compiled.rule.id, key, params, failureMode: compiled.rule.failureMode }),
      );
      const local = this.refusedLocally(buckets, request.cost, sentAtMs);
      if (local !== null) return { kind: "refused-locally", applicable, ...local };
      calls.push({ buckets, cost: request.cost, dryRun: request.dryRun });
      return { kind: "store", applicable, call: calls.length - 1 };
    });
    const replies = calls.length === 0 ? [] : await this.store.decide(calls);
    const decisions = plans.map((plan, i) => {
      if (plan.kind === "no-rule") return { ...NO_RULE, degraded: false, decidedAt: new Date(this.clock.now()) };
      const request = requests[i]!;
      let decision: Decision;
      if (plan.kind === "refused-locally") {
        decision = this.decision(plan.applicable, plan.reply, "OVER_LIMIT_CACHE", plan.consulted);
      } else {
        const reply = replies[plan.call]!;
        // A degraded reply is a failure mode's answer, not the store's knowledge: never remembered.
        if (!reply.degraded) this.learn(calls[plan.call]!, reply, sentAtMs);
        decision = this.decision(plan.applicable, reply, "COUNTER_STORE", null);
      }
      if (!request.dryRun) this.publishEvents(request, decision);
      this.report(decision);
      return decision;
    });
    this.telemetry.checked((performance.now() - started) / 1000, requests.length);
    return decisions;
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
   * The store's reply as the over-limit cache knows it, when it knows an
   * enforcing bucket of the request to be over its limit: those buckets
   * refuse, the others are not consulted. Null when the store must decide.
   */
  private refusedLocally(buckets: readonly BucketRef[], cost: number, nowMs: number): { reply: CounterReply; consulted: boolean[] } | null {
    const cache = this.options.overLimit;
    if (!cache) return null;
    const refusals = buckets.map((bucket) => cache.refusal(bucket, cost, nowMs));
    if (refusals.every((refusal) => refusal === null)) return null;
    const outcomes = buckets.map(
      ({ params }, i): BucketOutcome => refusals[i] ?? { conforming: true, remaining: params.capacity, resetAtMs: nowMs, retryAfterMs: null, delayMs: 0 },
    );
    return { reply: { nowMs, allowed: false, outcomes }, consulted: refusals.map((refusal) => refusal !== null) };
  }

  private learn(call: CounterCall, reply: CounterReply, sentAtMs: number): void {
    const cache = this.options.overLimit;
    if (cache) reply.outcomes.forEach((outcome, i) => cache.remember(call.buckets[i]!, call.cost, outcome, sentAtMs));
  }

  private applicable(request: CheckRequest, nowMs: number): Applicable[] {
    const applicable: Applicable[] = [];
    for (const compiled of this.rules.match(request)) {
      const key = compiled.keyOf(request);
      if (key === null) continue;
      const overridden = this.rules.overrideFor(compiled, request, nowMs);
      applicable.push({ compiled, key, params: overridden?.params ?? compiled.params, override: overridden?.override ?? null });
    }
    return applicable;
  }

  /** `consulted`: which buckets were read (null: all of them). */
  private decision(applicable: readonly Applicable[], reply: CounterReply, source: DecisionSource, consulted: readonly boolean[] | null): Decision {
    const unranked: Ranked[] = applicable.map(({ compiled, key, params, override }, i) => {
      const outcome = reply.outcomes[i]!;
      return {
        compiled,
        policyItem: override === null ? compiled.policyItem : policyItemOf(compiled.policyName, params),
        retryAfterMs: outcome.retryAfterMs,
        result: {
          rule: compiled.rule,
          key,
          override,
          allowed: outcome.conforming,
          limit: params.capacity,
          remaining: outcome.remaining,
          resetAt: new Date(outcome.resetAtMs),
          retryAfter: outcome.retryAfterMs === null ? null : Math.max(1, secondsUntil(outcome.retryAfterMs, 0)),
          delayMs: outcome.delayMs,
          consulted: consulted === null || consulted[i]!,
          nearLimit: isNearLimit(outcome.conforming, outcome.remaining, params.capacity),
        },
      };
    });
    const {
      ranked,
      enforcing,
      deciding: { result: deciding },
    } = rank(unranked);
    const allowed = reply.allowed;
    const throttled = ranked.filter((r) => r.compiled.rule.action === "THROTTLE");
    const retryAfter = allowed ? null : deciding.retryAfter;
    return {
      allowed,
      degraded: reply.degraded ?? false,
      decidedAt: new Date(reply.nowMs),
      source,
      rule: deciding.rule,
      action: deciding.rule.action,
      limit: deciding.limit,
      remaining: deciding.remaining,
      resetAt: deciding.resetAt,
      retryAfter,
      delayMs: allowed && throttled.length > 0 ? Math.max(...throttled.map((r) => r.result.delayMs)) : null,
      nearLimit: allowed && enforcing.some((r) => r.result.nearLimit),
      results: ranked.map((r) => r.result),
      headers: rateLimitHeaders({ allowed, nowMs: reply.nowMs, retryAfter, enforcing }),
    };
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
