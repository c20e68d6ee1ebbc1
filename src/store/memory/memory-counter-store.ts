/**
 * Counters in this process's memory: the embedded default, the LOCAL fallback
 * when Redis is unreachable, and a first-class store held to the same
 * conformance suite as Redis. It runs the domain's arithmetic directly; each
 * call is atomic because nothing else runs while it does.
 *
 * A CONCURRENCY bucket is its leases, each slot's name with its expiry (as
 * decide.lua's sorted set holds them): the algorithm reads their expiries,
 * an admitted call adds its lease, and releaseLease removes one.
 */

import { bucketId } from "../../domain/bucket-key.js";
import { combine, evaluate, stateExpiresAt, type CounterState } from "../../domain/algorithms/index.js";
import type { LeasedBucket } from "../../domain/lease.js";
import type { Algorithm } from "../../domain/rule.js";
import { leaseOf, systemClock, type Clock, type CounterCall, type CounterReply, type CounterStore, type LocalCounterStore } from "../../domain/ports.js";

interface StoredBucket {
  state: CounterState;
  expiresAt: number;
}

/** A CONCURRENCY bucket's leases: each slot's name, and when it frees itself. */
type Leases = Map<string, number>;

export interface MemoryCounterStoreOptions {
  clock?: Clock;
  /** How often expired buckets are swept; 0 disables the timer (tests sweep by hand). */
  sweepIntervalMs?: number;
}

export class MemoryCounterStore implements CounterStore, LocalCounterStore {
  readonly description = "memory (in-process)";
  private readonly buckets = new Map<string, StoredBucket>();
  private readonly leases = new Map<string, Leases>();
  private readonly clock: Clock;
  private readonly sweeper: NodeJS.Timeout | null;

  constructor(options: MemoryCounterStoreOptions = {}) {
    this.clock = options.clock ?? systemClock;
    const interval = options.sweepIntervalMs ?? 10_000;
    this.sweeper = interval > 0 ? setInterval(() => this.sweep(), interval).unref() : null;
  }

  async decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    return calls.map((call) => this.decideOne(call));
  }

  decideOne(call: CounterCall, refusedElsewhere = false): CounterReply {
    const now = this.clock.now();
    const ids = call.buckets.map((b) => bucketId(b.ruleId, b.key));
    const evaluations = call.buckets.map((bucket, i) => evaluate(this.stateOf(ids[i]!, bucket.params.algorithm), now, bucket.params, call.cost));
    const decided = combine(
      evaluations,
      call.buckets.map((b) => b.params.action),
      call.dryRun,
      refusedElsewhere,
    );
    decided.consumes.forEach((consumes, i) => {
      if (!consumes) return;
      const { params } = call.buckets[i]!;
      if (params.algorithm === "CONCURRENCY") return this.hold(ids[i]!, leaseOf(call), now + params.windowMs, now);
      const next = evaluations[i]!.next;
      this.buckets.set(ids[i]!, { state: next, expiresAt: stateExpiresAt(next, now, params) });
    });
    return { nowMs: now, allowed: decided.allowed, outcomes: decided.outcomes };
  }

  async releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    const now = this.clock.now();
    let released = false;
    for (const { ruleId, key } of buckets) {
      const leases = this.leases.get(bucketId(ruleId, key));
      const expiresAt = leases?.get(lease);
      if (expiresAt === undefined) continue;
      leases!.delete(lease);
      if (expiresAt > now) released = true;
    }
    return released;
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    const id = bucketId(ruleId, key);
    const hadLeases = this.leases.delete(id);
    return this.buckets.delete(id) || hadLeases;
  }

  private stateOf(id: string, algorithm: Algorithm): CounterState | undefined {
    if (algorithm !== "CONCURRENCY") return this.buckets.get(id)?.state;
    const leases = this.leases.get(id);
    return leases === undefined ? undefined : [...leases.values()];
  }

  /** Adds the lease to the bucket, dropping the leases that have expired (as decide.lua's ZREMRANGEBYSCORE does). */
  private hold(id: string, lease: string, expiresAt: number, now: number): void {
    let leases = this.leases.get(id);
    if (leases === undefined) this.leases.set(id, (leases = new Map()));
    for (const [held, at] of leases) if (at <= now) leases.delete(held);
    leases.set(lease, expiresAt);
  }

  /** Drops every bucket whose state can no longer change a decision (memory only: decisions never depend on it). */
  sweep(): number {
    const now = this.clock.now();
    let removed = 0;
    for (const [id, bucket] of this.buckets) {
      if (bucket.expiresAt <= now) {
        this.buckets.delete(id);
        removed++;
      }
    }
    for (const [id, leases] of this.leases) {
      for (const [lease, expiresAt] of leases) if (expiresAt <= now) leases.delete(lease);
      if (leases.size === 0) {
        this.leases.delete(id);
        removed++;
      }
    }
    return removed;
  }

  get size(): number {
    return this.buckets.size + this.leases.size;
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.buckets.clear();
    this.leases.clear();
  }
}

