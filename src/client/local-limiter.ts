/**
 * failureMode LOCAL: while Floodgate cannot be asked, the client decides by
 * itself with the rules it last saw. Every decision Floodgate sends carries
 * each applying rule whole (scope, glob, algorithm, limit, window...), so the
 * client learns the rules of the requests it actually checks, each at the
 * newest version it has seen. A request is matched, keyed and counted exactly
 * as the server does it, with the domain's own code (request parsing, globs,
 * bucket keys, the algorithms and their all-or-nothing combination), on
 * counters in this process that start empty when the outage does.
 *
 * Overrides: a decision names the override that set each bucket's limit,
 * and LOCAL applies it to that bucket (until the override's expiresAt) as
 * long as its decisions last said so. A bucket it never saw decided under an
 * override gets the rule's own limit: the overrides of a rule may be many
 * (a hundred thousand customers' plans), and only those of the buckets this
 * process checks matter to it.
 *
 * What it cannot know: rules it never saw apply (a request no known rule
 * applies to is allowed), and other processes' traffic. With `instances`
 * processes sharing Floodgate's limits, each takes limit ÷ instances, as the
 * server's own LOCAL mode does with INSTANCE_COUNT, so that together they
 * never admit more than a rule allows.
 *
 * Its decisions say degraded: true and source CLIENT_FAILURE_MODE, and carry
 * Retry-After on a refusal but none of the X-RateLimit and RateLimit headers:
 * those describe Floodgate's shared counters, which it could not read.
 */

import { combine, evaluate, limitParamsOf, stateExpiresAt, type BucketOutcome, type CounterState, type LimitParams } from "../domain/algorithms/index.js";
import { compileConditions, type AttributeTest } from "../domain/attributes.js";
import { bucketId, compileBucketKey, type BucketKeyOf } from "../domain/bucket-key.js";
import { isNearLimit } from "../domain/decision.js";
import { compileGlob, foldedGlobOf, foldPathCase, type CompiledGlob } from "../domain/glob.js";
import { rank, type Rankable, type Ranking } from "../domain/most-restrictive.js";
import { LruCache } from "../domain/lru-cache.js";
import { effectiveSpec } from "../domain/override.js";
import { httpMethod, parseCheckRequest, type CheckRequest } from "../domain/request.js";
import { ALL_TENANTS, ruleCountsMethod, type HttpMethod } from "../domain/rule.js";
import { retryAfterHeaders, retryAfterSeconds, ruleLessDecision, type FloodgateDecision } from "./decision.js";
import type { CheckLimitsInput, ClientRuleFragment } from "./generated/operations.js";

type Result = FloodgateDecision["results"][number];
type ClientOverride = NonNullable<Result["override"]>;

interface KnownRule {
  rule: ClientRuleFragment;
  /** The rule's method, as the domain types it (null: any). */
  method: HttpMethod | null;
  glob: CompiledGlob | null;
  /** As compared with the path of a check that ignores letter case. */
  foldedGlob: CompiledGlob | null;
  when: AttributeTest | null;
  keyOf: BucketKeyOf;
  /** This process's share of the rule. */
  params: LimitParams;
}

interface Counter {
  state: CounterState;
  expiresAt: number;
}

interface Ranked extends Rankable {
  result: Result;
}

/** A bucket that applies to a check: its rule, key, and the override its decisions last named (null: none). */
interface Applying {
  known: KnownRule;
  key: string;
  id: string;
  override: ClientOverride | null;
}

export interface LocalLimiterOptions {
  /** How many processes share each rule's limit while Floodgate is unreachable. */
  instances: number;
  /** Buckets counted at once; the least recently used go first. */
  maxBuckets: number;
}

export class LocalLimiter {
  private readonly rules = new Map<string, KnownRule>();
  private readonly counters: LruCache<string, Counter>;
  /** The override each bucket's last decision named, by bucket id. */
  private readonly overrides: LruCache<string, ClientOverride>;

  constructor(private readonly options: LocalLimiterOptions) {
    this.counters = new LruCache({ maxEntries: options.maxBuckets });
    this.overrides = new LruCache({ maxEntries: options.maxBuckets });
  }

  /**
   * Learns the rules of a decision Floodgate made to `input`, keeping each at
   * the newest version seen, and forgets the rules it knows that would apply
   * to `input` here but that Floodgate did not apply: deleted, disabled, or
   * changed so that they no longer match. Only a decision that went through
   * the rules says which applied (a screened one names none; a degraded one
   * may not have read them), so only such a decision forgets.
   */
  learn(input: CheckLimitsInput, decision: FloodgateDecision): void {
    for (const { rule, key, override } of decision.results) {
      const known = this.rules.get(rule.id);
      if (known === undefined || known.rule.version < rule.version) this.rules.set(rule.id, this.compile(rule));
      const id = bucketId(rule.id, key);
      if (override !== null) this.overrides.set(id, override);
      else this.overrides.delete(id);
    }
    if (decision.degraded || decision.reason !== null) return;
    const applied = new Set(decision.results.map(({ rule }) => rule.id));
    for (const { known } of this.applying(parseCheckRequest(input))) {
      if (!applied.has(known.rule.id)) this.rules.delete(known.rule.id);
    }
  }

  /** Forgets the counts of the outage just ended: the next one starts afresh, as Floodgate's counters moved on meanwhile. */
  reset(): void {
    this.counters.clear();
  }

  /** Decides one check; throws the domain's ValidationError for a check Floodgate would refuse as bad input. */
  decide(input: CheckLimitsInput, nowMs: number): FloodgateDecision {
    const request = parseCheckRequest(input);
    const applying = this.applying(request, nowMs);
    if (applying.length === 0) return ruleLessDecision(true, nowMs);
    const params = applying.map((bucket) => this.paramsOf(bucket));
    const evaluations = applying.map(({ id }, i) => evaluate(this.stateOf(id, nowMs), nowMs, params[i]!, request.cost));
    const decided = combine(
      evaluations,
      params.map(({ action }) => action),
      request.dryRun,
    );
    decided.consumes.forEach((consumes, i) => {
      if (!consumes) return;
      const state = evaluations[i]!.next;
      this.counters.set(applying[i]!.id, { state, expiresAt: stateExpiresAt(state, nowMs, params[i]!) });
    });
    const results = applying.map((bucket, i) => ranking(bucket, params[i]!, decided.outcomes[i]!));
    return this.decision(rank(results), decided.allowed, nowMs);
  }

  private decision({ ranked, enforcing, deciding }: Ranking<Ranked>, allowed: boolean, nowMs: number): FloodgateDecision {
    const results = ranked.map(({ result }) => result);
    const throttled = results.filter((r) => r.rule.action === "THROTTLE");
    const retryAfter = allowed ? null : deciding.result.retryAfter;
    const retryAfterMs = allowed ? null : deciding.result.retryAfterMs;
    const { rule, limit, remaining, resetAt } = deciding.result;
    return {
      allowed,
      degraded: true,
      decidedAt: new Date(nowMs).toISOString(),
      source: "CLIENT_FAILURE_MODE",
      // The deciding rule's:
      rule, action: rule.action, limit, remaining, resetAt, retryAfter, retryAfterMs,
      delayMs: allowed && throttled.length > 0 ? Math.max(...throttled.map((r) => r.delayMs)) : null,
      nearLimit: allowed && enforcing.some(({ result }) => result.nearLimit),
      results,
      headers: retryAfterHeaders(retryAfter),
      // Access lists and bans live in Floodgate: the client's own decisions know none.
      reason: null,
      lease: null,
    };
  }

  /** The buckets of the rules that apply to the request, each with the override its last decision named, unless that has ended. */
  private applying(request: CheckRequest, nowMs = Date.now()): Applying[] {
    const applying: Applying[] = [];
    for (const known of this.rules.values()) {
      const { rule, method, glob, when } = known;
      if (!rule.enabled || (rule.tenantId !== request.tenantId && rule.tenantId !== ALL_TENANTS)) continue;
      // A lease granted here could never be released through Floodgate: during an outage CONCURRENCY rules do not limit.
      if (rule.algorithm === "CONCURRENCY") continue;
      if (!ruleCountsMethod(method, request.method)) continue;
      if (when !== null && !when(request.attributes)) continue;
      if (glob !== null && (request.resource === null || !resourceMatches(known, request.resource, request.ignorePathCase))) continue;
      const key = known.keyOf(request);
      if (key === null) continue;
      const id = bucketId(rule.id, key);
      const override = this.overrides.get(id) ?? null;
      const ended = override?.expiresAt != null && Date.parse(override.expiresAt) <= nowMs;
      applying.push({ known, key, id, override: ended ? null : override });
    }
    return applying;
  }

  /** A bucket's params: its override's where it has one, this process's share of them. */
  private paramsOf({ known, override }: Applying): LimitParams {
    return override === null ? known.params : this.share(limitParamsOf(effectiveSpec(known.rule, override)));
  }

  private share(whole: LimitParams): LimitParams {
    const share = (n: number) => Math.max(1, Math.floor(n / this.options.instances));
    return { ...whole, limit: share(whole.limit), capacity: share(whole.capacity) };
  }

  private stateOf(id: string, nowMs: number): CounterState | undefined {
    const counter = this.counters.get(id);
    return counter !== undefined && counter.expiresAt > nowMs ? counter.state : undefined;
  }

  private compile(rule: ClientRuleFragment): KnownRule {
    const method = httpMethod(rule.method, "rule.method");
    const glob = rule.resource === null ? null : compileGlob(rule.resource);
    return {
      rule,
      method,
      glob,
      foldedGlob: glob === null ? null : foldedGlobOf(glob),
      when: compileConditions(rule.when),
      keyOf: compileBucketKey({ ...rule, method }),
      params: this.share(limitParamsOf(rule)),
    };
  }
}

/** As Floodgate's rule index has it: the path as spelt, or, for a check that ignores letter case, folded against the folded glob. */
function resourceMatches(known: KnownRule, path: string, ignoreCase: boolean): boolean {
  return known.glob!.matches(path) || (ignoreCase && known.foldedGlob!.matches(foldPathCase(path)));
}

function ranking({ known: { rule }, key, override }: Applying, params: LimitParams, outcome: BucketOutcome): Ranked {
  // Whole milliseconds, at least one for a refusal, as Floodgate gives them.
  const retryAfterMs = outcome.retryAfterMs === null ? null : Math.max(1, Math.ceil(outcome.retryAfterMs));
  return {
    retryAfterMs,
    result: {
      rule,
      key,
      override,
      allowed: outcome.conforming,
      limit: params.capacity,
      remaining: outcome.remaining,
      resetAt: new Date(outcome.resetAtMs).toISOString(),
      retryAfter: retryAfterMs === null ? null : retryAfterSeconds(retryAfterMs, 0),
      retryAfterMs,
      delayMs: outcome.delayMs,
      consulted: true,
      nearLimit: isNearLimit(outcome.conforming, outcome.remaining, params.capacity),
    },
  };
}
