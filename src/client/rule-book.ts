/**
 * The rules the client has seen, by id and version, so that a batch's answer
 * can name each rule by both (WireDecision, whose fields go under one-letter
 * aliases) and the decision handed back still carries it in full, every
 * field under its name. A rule's version increases on every change of it,
 * so an id and a version name one rule's fields for good: an entry never goes
 * stale, it only stops being named. Memory is bounded: least recently used
 * versions go first.
 *
 * A tenant's first batch asks for its rules in full (FloodgateChecksInFull).
 * A later decision naming a version not in the book (a rule created or
 * changed since) is completed from the same checks sent again as dry runs
 * (FloodgateRules), which count nothing.
 */

import { isNearLimit, retryAfterOf } from "../domain/decision.js";
import { headersOfLines } from "../domain/header-lines.js";
import { LruCache } from "../domain/lru-cache.js";
import type { FloodgateDecision } from "./decision.js";
import type { ClientRuleFragment, RuleVersionFragment, WireDecisionFragment } from "./generated/operations.js";

/** A decision with its rules in full. */
interface NamingRules {
  rule: ClientRuleFragment | null;
  results: readonly { rule: ClientRuleFragment }[];
}

export class RuleBook {
  private readonly rules: LruCache<string, ClientRuleFragment>;
  /** Tenants whose rules in full were asked for once. */
  private readonly tenants: LruCache<string, true>;

  constructor(maxEntries: number) {
    this.rules = new LruCache({ maxEntries });
    this.tenants = new LruCache({ maxEntries });
  }

  /** Whether a batch of this tenant's checks has asked for their rules in full yet. */
  hasMet(tenantId: string): boolean {
    return this.tenants.get(tenantId) !== undefined;
  }

  /** Keeps every rule the decisions name; decisions to checks of `tenantId`. */
  learn(tenantId: string, decisions: readonly NamingRules[]): void {
    this.tenants.set(tenantId, true);
    for (const decision of decisions) {
      if (decision.rule !== null) this.keep(decision.rule);
      for (const result of decision.results) this.keep(result.rule);
    }
  }

  /** The decision with its fields named and its rules in full; null when the book lacks one of them. */
  complete(wire: WireDecisionFragment): FloodgateDecision | null {
    const rule = wire.u === null ? null : this.find(wire.u);
    if (rule === undefined) return null;
    const results: FloodgateDecision["results"] = [];
    for (const r of wire.z) {
      const resultRule = this.find(r.u);
      if (resultRule === undefined) return null;
      const override = r.v === null ? null : { limit: r.v.l, burst: r.v.b, window: r.v.w, windowUnit: r.v.u, expiresAt: r.v.x };
      results.push({
        rule: resultRule,
        key: r.k,
        override,
        allowed: r.a,
        limit: r.l,
        remaining: r.r,
        resetAt: r.t,
        retryAfter: retryAfterOf(r.m),
        retryAfterMs: r.m,
        delayMs: r.w,
        consulted: r.q,
        nearLimit: isNearLimit(r.a, r.r, r.l),
      });
    }
    const { o: reason, e: lease } = wire;
    return {
      allowed: wire.a,
      degraded: wire.g,
      decidedAt: wire.d,
      source: wire.s,
      action: wire.c,
      limit: wire.l,
      remaining: wire.r,
      resetAt: wire.t,
      retryAfter: wire.y,
      retryAfterMs: wire.m,
      delayMs: wire.w,
      nearLimit: wire.n,
      headers: headersOfLines(wire.h),
      reason: reason === null ? null : { code: reason.c, message: reason.m, until: reason.u },
      lease: lease === null ? null : { id: lease.i, expiresAt: lease.x },
      rule,
      results,
    };
  }

  private keep(rule: ClientRuleFragment): void {
    this.rules.set(keyOf(rule.id, rule.version), rule);
  }

  private find(named: RuleVersionFragment): ClientRuleFragment | undefined {
    return this.rules.get(keyOf(named.i, named.v));
  }
}

function keyOf(id: string, version: number): string {
  return `${version}:${id}`;
}
