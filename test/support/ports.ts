/** Stand-ins for the ports, for tests that run the engine in-process (the rule repository: in-memory-rule-repository.ts). */

import type { LeasedBucket } from "../../src/domain/lease.js";
import type { CounterCall, CounterReply, CounterStore } from "../../src/domain/ports.js";

/** A counter store that records, for every decide(), how many calls it was given, and for every releaseLease() the buckets. */
export class CountingCounterStore implements CounterStore {
  readonly description = "counting";
  readonly decideSizes: number[] = [];
  readonly releasedBuckets: LeasedBucket[][] = [];
  constructor(private readonly inner: CounterStore) {}

  decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    this.decideSizes.push(calls.length);
    return this.inner.decide(calls);
  }

  reset(ruleId: string, key: string): Promise<boolean> {
    return this.inner.reset(ruleId, key);
  }

  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    this.releasedBuckets.push([...buckets]);
    return this.inner.releaseLease(lease, buckets);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
