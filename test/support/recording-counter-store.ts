/**
 * A probe in front of a real counter store: every round trip (one call of
 * `decide`) with its calls and options, in order. A round trip `failureOf`
 * gives an error for fails with it before reaching the store.
 */

import type { LeasedBucket } from "../../src/domain/lease.js";
import type { CounterCall, CounterReply, CounterStore, DecideOptions } from "../../src/domain/ports.js";

export class RecordingCounterStore implements CounterStore {
  readonly description = "recording";
  readonly roundTrips: { calls: readonly CounterCall[]; options: DecideOptions | undefined }[] = [];
  constructor(
    private readonly inner: CounterStore,
    public failureOf: (calls: readonly CounterCall[]) => Error | null = () => null,
  ) {}

  /** Every call sent, in order. */
  get calls(): CounterCall[] {
    return this.roundTrips.flatMap((trip) => trip.calls);
  }

  /** Calls sent with a bucket of `ruleId`. */
  callsOf(ruleId: string): number {
    return this.calls.filter((call) => call.buckets.some((b) => b.ruleId === ruleId)).length;
  }

  decide(calls: readonly CounterCall[], options?: DecideOptions): Promise<CounterReply[]> {
    this.roundTrips.push({ calls: [...calls], options });
    const failure = this.failureOf(calls);
    if (failure !== null) return Promise.reject(failure);
    return this.inner.decide(calls, options);
  }

  reset(ruleId: string, key: string): Promise<boolean> {
    return this.inner.reset(ruleId, key);
  }

  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    return this.inner.releaseLease(lease, buckets);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
