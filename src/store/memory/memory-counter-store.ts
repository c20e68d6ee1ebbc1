/**
 * Counters in this process's memory: the embedded default, the LOCAL fallback
 * when Redis is unreachable, and a first-class store held to the same
 * conformance suite as Redis. It runs the domain's arithmetic directly; each
 * call is atomic because nothing else runs while it does.
 */

import { bucketId } from "../../domain/bucket-key.js";
import { combine, evaluate, stateExpiresAt, type CounterState } from "../../domain/algorithms/index.js";
import { systemClock, type Clock, type CounterCall, type CounterReply, type CounterStore, type LocalCounterStore } from "../../domain/ports.js";

interface StoredBucket {
  state: CounterState;
  expiresAt: number;
}

export interface MemoryCounterStoreOptions {
  clock?: Clock;
  /** How often expired buckets are swept; 0 disables the timer (tests sweep by hand). */
  sweepIntervalMs?: number;
}

export class MemoryCounterStore implements CounterStore, LocalCounterStore {
  readonly description = "memory (in-process)";
  private readonly buckets = new Map<string, StoredBucket>();
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
    const evaluations = call.buckets.map((bucket, i) => evaluate(this.buckets.get(ids[i]!)?.state, now, bucket.params, call.cost));
    const decided = combine(
      evaluations,
      call.buckets.map((b) => b.params.action),
      call.dryRun,
      refusedElsewhere,
    );
    decided.consumes.forEach((consumes, i) => {
      if (!consumes) return;
      const next = evaluations[i]!.next;
      this.buckets.set(ids[i]!, { state: next, expiresAt: stateExpiresAt(next, now, call.buckets[i]!.params) });
    });
    return { nowMs: now, allowed: decided.allowed, outcomes: decided.outcomes };
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    return this.buckets.delete(bucketId(ruleId, key));
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
    return removed;
  }

  get size(): number {
    return this.buckets.size;
  }

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.buckets.clear();
  }
}
