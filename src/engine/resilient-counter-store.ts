/**
 * Keeps deciding when the counter store cannot. Calls go to the primary store
 * through a circuit breaker and under a deadline; when a call fails (error or
 * deadline) or the breaker is open, each rule decides by its failureMode and
 * the reply says `degraded`:
 *   OPEN    allow
 *   CLOSED  deny, retry when the breaker next tries the store
 *   LOCAL   decide on this instance's own in-memory counters, with the rule's
 *           limit divided by the number of instances, so that all instances
 *           together never admit more than the rule allows
 * The request stays all or nothing: the local counters count it only if no
 * enforcing rule refuses it.
 */

import type { LimitParams } from "../domain/algorithms/index.js";
import { UnavailableError } from "../domain/errors.js";
import type { BucketRef, Clock, CounterCall, CounterReply, CounterStore, LocalCounterStore } from "../domain/ports.js";
import type { FailureMode } from "../domain/rule.js";
import type { CircuitBreaker } from "./circuit-breaker.js";
import { noTelemetry, type Telemetry } from "./telemetry.js";

export interface ResilientCounterStoreOptions {
  primary: CounterStore;
  /** This instance's own counters, for LOCAL rules. */
  local: LocalCounterStore;
  breaker: CircuitBreaker;
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

  constructor(private readonly options: ResilientCounterStoreOptions) {
    this.description = options.primary.description;
  }

  async decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    const { primary, breaker } = this.options;
    if (!breaker.allows()) return calls.map((call) => this.byFailureMode(call));
    const telemetry = this.options.telemetry ?? noTelemetry;
    const started = performance.now();
    try {
      const replies = await withDeadline(primary.decide(calls), this.options.timeoutMs * Math.ceil(calls.length / CHECKS_PER_TIMEOUT));
      telemetry.storeCalled((performance.now() - started) / 1000, false);
      breaker.succeeded();
      return replies;
    } catch {
      telemetry.storeCalled((performance.now() - started) / 1000, true);
      breaker.failed();
      return calls.map((call) => this.byFailureMode(call));
    }
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    if (!this.options.breaker.allows()) throw new UnavailableError("the counter store is unreachable; try again shortly");
    try {
      const reset = await withDeadline(this.options.primary.reset(ruleId, key), this.options.timeoutMs);
      this.options.breaker.succeeded();
      return reset;
    } catch (error) {
      this.options.breaker.failed();
      throw new UnavailableError("the counter store is unreachable; try again shortly", { cause: error });
    }
  }

  async close(): Promise<void> {
    await this.options.primary.close();
    await this.options.local.close();
  }

  private byFailureMode(call: CounterCall): CounterReply {
    const { local, breaker, clock } = this.options;
    const now = clock.now();
    const closedRefuses = call.buckets.some((b) => modeOf(b) === "CLOSED" && b.params.action !== "LOG_ONLY");
    const localBuckets = call.buckets.filter((b) => modeOf(b) === "LOCAL").map((b) => this.share(b));
    const localReply = local.decideOne({ buckets: localBuckets, cost: call.cost, dryRun: call.dryRun }, closedRefuses);
    let next = 0;
    const outcomes = call.buckets.map((bucket) => {
      switch (modeOf(bucket)) {
        case "LOCAL":
          return localReply.outcomes[next++]!;
        case "OPEN":
          return { conforming: true, remaining: bucket.params.capacity, resetAtMs: now, retryAfterMs: null, delayMs: 0 };
        case "CLOSED":
          return { conforming: false, remaining: 0, resetAtMs: now, retryAfterMs: Math.max(1000, breaker.retryAtMs - now), delayMs: 0 };
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
