/**
 * The decision: for each request, find the rules that apply, send them to the
 * counter store as one atomic call, and turn the store's outcomes into a
 * Decision with its most restrictive rule, every rule's result and the
 * headers. Denials (and shadow denials) are published as throttle events.
 */

import type { Decision, RuleResult } from "../domain/decision.js";
import type { Clock, CounterCall, CounterReply, CounterStore, EventBus } from "../domain/ports.js";
import type { CheckRequest } from "../domain/request.js";
import type { CompiledRule } from "./compiled-rule.js";
import { rateLimitHeaders, secondsUntil } from "./headers.js";
import type { RuleBook } from "./rule-book.js";

interface Applicable {
  compiled: CompiledRule;
  key: string;
}

interface Ranked {
  result: RuleResult;
  compiled: CompiledRule;
  retryAfterMs: number | null;
}

const NO_RULE: Omit<Decision, "decidedAt" | "degraded"> = Object.freeze({
  allowed: true,
  rule: null,
  action: null,
  limit: null,
  remaining: null,
  resetAt: null,
  retryAfter: null,
  delayMs: null,
  results: [],
  headers: [],
});

export class Limiter {
  constructor(
    private readonly rules: RuleBook,
    private readonly store: CounterStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
  ) {}

  async check(requests: readonly CheckRequest[]): Promise<Decision[]> {
    const plans = requests.map((request) => this.applicable(request));
    const calls: CounterCall[] = [];
    plans.forEach((applicable, i) => {
      if (applicable.length === 0) return;
      const request = requests[i]!;
      calls.push({
        buckets: applicable.map(({ compiled, key }) => ({
          ruleId: compiled.rule.id,
          key,
          params: compiled.params,
          failureMode: compiled.rule.failureMode,
        })),
        cost: request.cost,
        dryRun: request.dryRun,
      });
    });
    const replies = calls.length === 0 ? [] : await this.store.decide(calls);
    let next = 0;
    return plans.map((applicable, i) => {
      if (applicable.length === 0) return { ...NO_RULE, degraded: false, decidedAt: new Date(this.clock.now()) };
      const decision = this.decision(applicable, replies[next++]!);
      if (!requests[i]!.dryRun) this.publishRefusals(requests[i]!, decision, replies[next - 1]!.nowMs);
      return decision;
    });
  }

  private applicable(request: CheckRequest): Applicable[] {
    const applicable: Applicable[] = [];
    for (const compiled of this.rules.match(request)) {
      const key = compiled.keyOf(request);
      if (key !== null) applicable.push({ compiled, key });
    }
    return applicable;
  }

  private decision(applicable: readonly Applicable[], reply: CounterReply): Decision {
    const ranked: Ranked[] = applicable.map(({ compiled, key }, i) => {
      const outcome = reply.outcomes[i]!;
      return {
        compiled,
        retryAfterMs: outcome.retryAfterMs,
        result: {
          rule: compiled.rule,
          key,
          allowed: outcome.conforming,
          limit: compiled.params.capacity,
          remaining: outcome.remaining,
          resetAt: new Date(outcome.resetAtMs),
          retryAfter: outcome.retryAfterMs === null ? null : Math.max(1, secondsUntil(outcome.retryAfterMs, 0)),
          delayMs: outcome.delayMs,
        },
      };
    });
    ranked.sort(mostRestrictiveFirst);
    const enforcing = ranked.filter((r) => r.compiled.rule.action !== "LOG_ONLY");
    const deciding = (enforcing[0] ?? ranked[0])!.result;
    const allowed = reply.allowed;
    const throttled = ranked.filter((r) => r.compiled.rule.action === "THROTTLE");
    const retryAfter = allowed ? null : deciding.retryAfter;
    return {
      allowed,
      degraded: reply.degraded ?? false,
      decidedAt: new Date(reply.nowMs),
      rule: deciding.rule,
      action: deciding.rule.action,
      limit: deciding.limit,
      remaining: deciding.remaining,
      resetAt: deciding.resetAt,
      retryAfter,
      delayMs: allowed && throttled.length > 0 ? Math.max(...throttled.map((r) => r.result.delayMs)) : null,
      results: ranked.map((r) => r.result),
      headers: rateLimitHeaders({ allowed, nowMs: reply.nowMs, retryAfter, enforcing }),
    };
  }

  private publishRefusals(request: CheckRequest, decision: Decision, nowMs: number): void {
    for (const result of decision.results) {
      if (result.allowed) continue;
      const shadow = result.rule.action === "LOG_ONLY";
      this.events.publishThrottle({
        at: new Date(nowMs),
        tenantId: request.tenantId,
        ruleId: result.rule.id,
        ruleName: result.rule.name,
        key: result.key,
        resource: request.resource,
        method: request.method,
        action: result.rule.action,
        limit: result.limit,
        retryAfter: result.retryAfter,
        shadow,
        count: 1,
      });
    }
  }
}

/**
 * Refusals first (enforcing before shadow), longest wait first; then the
 * fewest remaining; ties go to the higher priority, then the rule id.
 */
function mostRestrictiveFirst(a: Ranked, b: Ranked): number {
  return (
    rank(a) - rank(b) ||
    (b.retryAfterMs ?? 0) - (a.retryAfterMs ?? 0) ||
    a.result.remaining - b.result.remaining ||
    b.result.rule.priority - a.result.rule.priority ||
    (a.result.rule.id < b.result.rule.id ? -1 : a.result.rule.id > b.result.rule.id ? 1 : 0)
  );
}

function rank(r: Ranked): number {
  if (r.result.allowed) return 2;
  return r.compiled.rule.action === "LOG_ONLY" ? 1 : 0;
}
