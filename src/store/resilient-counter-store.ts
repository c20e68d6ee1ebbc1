/**
 * Keeps deciding when the counter store cannot. Calls go to the primary store
 * through a circuit breaker per shard (per Redis Cluster master; one Redis is
 * one shard) and under a deadline; when a call fails (error or deadline) or a
 * breaker of one of its shards is open, each of its rules decides by its
 * failureMode and the reply says `degraded`:
 *   OPEN    allow
 *   CLOSED  deny, retry when the breaker next tries the store
 *   LOCAL   decide on this instance's own in-memory counters, with the rule's
 *           limit divided by the number of instances, so that all instances
 *           together never admit more than the rule allows
 * The request stays all or nothing: the local counters count it only if no
 * enforcing rule refuses it. A call with buckets on several shards goes to
 * the store only when every one of their breakers lets it, and is decided by
 * failure mode whole when any of them fails: a cross-slot check is reserved
 * and released as one (docs/redis-cluster.md), never decided half by Redis
 * and half by failure mode. Calls whose shards are healthy are decided by the
 * store as usual, even in the same batch.
 *
 * Breakers follow the topology: a shard the store names for the first time
 * gets a new (closed) breaker, and whenever the store learns the topology
 * anew the breakers of shards it no longer has (a master replaced by its
 * promoted replica) are forgotten, so the breakers, and their metrics, are
 * those of the masters there are.
 */

import type { LimitParams } from "../domain/algorithms/index.js";
import { UnavailableError } from "../domain/errors.js";
import type { LeasedBucket } from "../domain/lease.js";
import type { BucketRef, Clock, CounterCall, CounterReply, CounterStore, DecideOptions, LocalCounterStore, ShardedCounterStore, Unsubscribe } from "../domain/ports.js";
import type { FailureMode } from "../domain/rule.js";
import { CircuitBreaker, type BreakerState } from "../domain/circuit-breaker.js";
import { noTelemetry, type Telemetry } from "../domain/telemetry.js";

export interface ResilientCounterStoreOptions {
  primary: ShardedCounterStore;
  /** This instance's own counters, for LOCAL rules. */
  local: LocalCounterStore;
  /** Every shard's breaker: consecutive failures that open it, and how long it stays open before a trial. */
  breakers: { failureThreshold: number; openMs: number };
  /** Told when a shard's breaker changes state (for the log). */
  onBreakerChange?: (shard: string, state: BreakerState) => void;
  /**
   * Told when the store answered but could not decide a call on its own
   * buckets (a key of another type, a calendar period its clock is not in): the call
   * goes by failure mode, and the shard, which answered, is not held to blame.
   */
  onCallFailed?: (error: unknown) => void;
  /** How many instances share each LOCAL rule's limit. */
  instances: number;
  /** Longest wait for the primary store, per round trip of up to CHECKS_PER_TIMEOUT checks. */
  timeoutMs: number;
  clock: Clock;
  telemetry?: Telemetry;
}

/** A batch is one round trip, but Redis runs its checks one after the other: its deadline grows with its size. */
export const CHECKS_PER_TIMEOUT = 100;

export class ResilientCounterStore implements CounterStore {
  readonly description: string;
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly telemetry: Telemetry;
  private readonly unwatch: Unsubscribe;

  constructor(private readonly options: ResilientCounterStoreOptions) {
    this.description = options.primary.description;
    this.telemetry = options.telemetry ?? noTelemetry;
    this.unwatch = options.primary.watchShards((shards) => this.keepOnly(new Set(shards)));
  }

  /**
   * A caller's budget shorter than the store's own deadline bounds the wait
   * instead; a call it cuts short is decided by failure mode, but is not held
   * against the shard's breaker, since the store may only be slower than this
   * one caller can wait (a gRPC caller's deadline of 20 ms must not open the
   * breaker for every other caller). A budget already spent sends nothing.
   */
  async decide(calls: readonly CounterCall[], options: DecideOptions = {}): Promise<CounterReply[]> {
    const guarded = calls.map((call) => this.breakersOf(call));
    const budgetMs = options.budgetMs ?? Number.POSITIVE_INFINITY;
    // A call needs every one of its breakers' yes; asking them all first keeps
    // a half-open breaker's one trial from going to a call another holds back.
    // Loops, not flatMap, on this path of every check: Node 20 runs flat and flatMap about forty times slower than map (BENCHMARKS.md, "The server's instructions").
    const sent: number[] = [];
    if (budgetMs > 0) {
      guarded.forEach((breakersOfCall, i) => {
        const breakers = [...breakersOfCall.values()];
        if (breakers.every((b) => b.wouldAllow()) && breakers.every((b) => b.allows())) sent.push(i);
      });
    }
    const replies: (CounterReply | undefined)[] = new Array(calls.length);
    if (sent.length > 0) {
      const started = performance.now();
      const touched = new Map<string, CircuitBreaker>();
      for (const i of sent) for (const [shard, breaker] of guarded[i]!) touched.set(shard, breaker);
      const ownDeadlineMs = this.options.timeoutMs * Math.ceil(sent.length / CHECKS_PER_TIMEOUT);
      const callerBound = budgetMs < ownDeadlineMs;
      // decideEach reports failures in its answer; should it throw all the same, every shard it touched has failed.
      const { results, failedShards } = await this.options.primary
        .decideEach(
          sent.map((i) => calls[i]!),
          Math.min(ownDeadlineMs, budgetMs),
        )
        .catch((error: unknown) => ({ results: sent.map(() => ({ error })), failedShards: new Set(touched.keys()) }));
      let callsFailed = false;
      results.forEach((result, j) => {
        if (!("error" in result)) return void (replies[sent[j]!] = result);
        callsFailed = true;
        if (![...guarded[sent[j]!]!.keys()].some((shard) => failedShards.has(shard))) this.options.onCallFailed?.(result.error);
      });
      this.telemetry.storeCalled((performance.now() - started) / 1000, callsFailed || failedShards.size > 0);
      for (const [shard, breaker] of touched) {
        if (!failedShards.has(shard)) breaker.succeeded();
        // A half-open breaker's trial must end one way or the other: inconclusive counts as failed.
        else if (!callerBound || breaker.state === "half-open") breaker.failed();
      }
    }
    return calls.map((call, i) => replies[i] ?? this.byFailureMode(call, guarded[i]!.values()));
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    const breaker = this.breakerOf(this.options.primary.shardOf(ruleId, key));
    if (!breaker.allows()) throw new UnavailableError("the counter store is unreachable; try again shortly");
    try {
      const reset = await withDeadline(this.options.primary.reset(ruleId, key), this.options.timeoutMs);
      breaker.succeeded();
      return reset;
    } catch (error) {
      breaker.failed();
      throw new UnavailableError("the counter store is unreachable; try again shortly", { cause: error });
    }
  }

  /**
   * Frees the lease where its check was decided: in this instance's own
   * counters when LOCAL rules decided it while the store was unreachable (a
   * check is decided wholly by the store or wholly by failure mode, so such
   * a lease holds nothing in the store), else in the store, shard by shard
   * as reset does. A shard that cannot be reached fails the release: the
   * lease then expires with its window.
   */
  async releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    if (await this.options.local.releaseLease(lease, buckets)) return true;
    const breakers = [...new Set(buckets.map(({ ruleId, key }) => this.breakerOf(this.options.primary.shardOf(ruleId, key))))];
    if (!breakers.every((breaker) => breaker.allows())) throw new UnavailableError("the counter store is unreachable; try again shortly");
    try {
      const released = await withDeadline(this.options.primary.releaseLease(lease, buckets), this.options.timeoutMs);
      for (const breaker of breakers) breaker.succeeded();
      return released;
    } catch (error) {
      for (const breaker of breakers) breaker.failed();
      throw new UnavailableError("the counter store is unreachable; try again shortly", { cause: error });
    }
  }

  /** Every known shard's breaker state (for /readyz). */
  breakerStates(): Record<string, BreakerState> {
    return Object.fromEntries([...this.breakers].map(([shard, breaker]) => [shard, breaker.state]));
  }

  async close(): Promise<void> {
    this.unwatch();
    await this.options.primary.close();
    await this.options.local.close();
  }

  /** The breakers of the shards a call's buckets live on, by shard. */
  private breakersOf(call: CounterCall): Map<string, CircuitBreaker> {
    const breakers = new Map<string, CircuitBreaker>();
    for (const bucket of call.buckets) {
      const shard = this.options.primary.shardOf(bucket.ruleId, bucket.key);
      if (!breakers.has(shard)) breakers.set(shard, this.breakerOf(shard));
    }
    return breakers;
  }

  /** A shard's breaker, made closed the first time the shard is named. */
  private breakerOf(shard: string): CircuitBreaker {
    const known = this.breakers.get(shard);
    if (known) return known;
    const { failureThreshold, openMs } = this.options.breakers;
    const breaker: CircuitBreaker = new CircuitBreaker({
      failureThreshold,
      openMs,
      clock: this.options.clock,
      onStateChange: (state) => {
        // A call in flight when its shard was forgotten may still move the old breaker: nobody reports on it any more.
        if (this.breakers.get(shard) !== breaker) return;
        this.telemetry.breakerChanged(shard, state);
        this.options.onBreakerChange?.(shard, state);
      },
    });
    this.breakers.set(shard, breaker);
    this.telemetry.breakerChanged(shard, breaker.state);
    return breaker;
  }

  /** Forgets the breakers of shards that are gone. */
  private keepOnly(shards: ReadonlySet<string>): void {
    for (const shard of [...this.breakers.keys()]) {
      if (shards.has(shard)) continue;
      this.breakers.delete(shard);
      this.telemetry.breakerForgotten(shard);
    }
  }

  private byFailureMode(call: CounterCall, breakers: Iterable<CircuitBreaker>): CounterReply {
    const { local, clock } = this.options;
    const now = clock.now();
    const retryAtMs = Math.max(...[...breakers].map((b) => b.retryAtMs));
    const closedRefuses = call.buckets.some((b) => modeOf(b) === "CLOSED" && b.params.action !== "LOG_ONLY");
    const localBuckets = call.buckets.filter((b) => modeOf(b) === "LOCAL").map((b) => this.share(b));
    const localReply = local.decideOne({ ...call, buckets: localBuckets }, closedRefuses);
    let next = 0;
    const outcomes = call.buckets.map((bucket) => {
      switch (modeOf(bucket)) {
        case "LOCAL":
          return localReply.outcomes[next++]!;
        case "OPEN":
          return { conforming: true, remaining: bucket.params.capacity, resetAtMs: now, retryAfterMs: null, delayMs: 0 };
        case "CLOSED":
          return { conforming: false, remaining: 0, resetAtMs: now, retryAfterMs: Math.max(1000, retryAtMs - now), delayMs: 0 };
      }
    });
    return { nowMs: now, allowed: localReply.allowed, outcomes, degraded: true };
  }

  /** This instance's share of a LOCAL rule: its limit and capacity divided by the instance count, at least 1. */
  private share(bucket: BucketRef): BucketRef {
    const { instances } = this.options;
    const params: LimitParams = {
      ...bucket.params,
      limit: Math.max(1, Math.floor(bucket.params.limit / instances)),
      capacity: Math.max(1, Math.floor(bucket.params.capacity / instances)),
    };
    return { ...bucket, params };
  }
}

function modeOf(bucket: BucketRef): FailureMode {
  return bucket.failureMode ?? "OPEN";
}

/**
 * The promise's value, or a rejection once `ms` have passed. A late answer is
 * dropped: the check has already been decided by failure mode, which may then
 * count a request the store also counted (an over-count, never an
 * over-admission beyond what OPEN rules allow by design).
 */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer from the counter store within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
