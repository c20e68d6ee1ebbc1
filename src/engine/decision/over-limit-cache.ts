/**
 * Envoy's local cache of over-limit buckets. When the counter store refuses a
 * request because a bucket is over its limit, the refusal says how long until
 * a request of that cost would conform (retryAfterMs). Until then the answer
 * for that bucket cannot change by itself: buckets only drain with time, and
 * other requests only add to them. So this instance remembers the refusal and
 * refuses the same bucket's requests itself, without a round trip, until then.
 *
 * Worked example: per-user limit 5 per minute, u1 sends its 6th request at
 * 12:00:20; the store refuses it with retryAfterMs 40,000. Every request of
 * u1 (cost 1 or more) until 12:01:00 by this instance's clock is refused here.
 * The first one after that goes to the store again.
 *
 * Why it stays correct:
 *   - It only ever refuses, never admits; a refused request consumes nothing
 *     anywhere, which is exactly what the store would have done.
 *   - The expiry is counted from when the call was sent, which is no later
 *     than when the store decided: the entry ends a little early, never late.
 *   - A refusal for cost c holds for costs of c or more only (a larger request
 *     never conforms sooner), not for smaller ones.
 *   - An entry holds the rule's parameters; once the rule changes (a raised
 *     limit, another window or algorithm) they differ and the entry is
 *     dropped, so the change takes effect at once. resetLimit, through any
 *     instance, forgets the bucket's entry on every instance (the event bus
 *     carries the reset).
 *   - LOG_ONLY rules never refuse, so they are never cached.
 *   - CONCURRENCY rules are never cached: their buckets drain by releases
 *     too, not only with time, so a refusal can end long before its
 *     retryAfter (the time the first lease would expire by itself).
 * What it cannot see: a reset whose message this instance missed (it was
 * disconnected from Redis's pub/sub when the reset was published). It keeps
 * refusing until the entry's time, which is when the bucket would have
 * conformed anyway had it not been reset.
 *
 * What it answers is the refusal as the store read it: remaining and resetAt
 * as of then (readAtMs, the store's clock), and the wait counted down to now
 * on this instance's clock. Only durations cross between the two clocks: how
 * long until the reset is the store's own (resetAtMs − readAtMs) less the
 * time this instance has seen pass since it sent the call, so an instance's
 * clock minutes away from Redis's changes nothing it reports.
 *
 * Memory is bounded: at most maxEntries buckets, and at most ENTRY_BUDGET
 * bytes per entry it may hold on average (a bucket key may be thousands of
 * characters long: a path, attributes), the least recently used going first
 * when a new one needs room (a bucket still being hammered stays,
 * one nobody asks about any more goes), and expired entries dropped when met.
 * Eviction is O(1) however many entries came and went (see LruCache: a Map
 * evicted through keys().next() slows down as deletions pile up).
 */

import type { BucketOutcome, LimitParams } from "../../domain/algorithms/index.js";
import { bucketId } from "../../domain/bucket-key.js";
import { sameCalendar } from "../../domain/calendar.js";
import { LruCache } from "../../domain/lru-cache.js";
import type { BucketRef } from "../../domain/ports.js";

interface Entry {
  ruleId: string;
  params: LimitParams;
  /** The smallest cost known to be refused until untilMs. */
  cost: number;
  /** By this instance's clock: when the call that was refused was sent, and when a request of `cost` would conform. */
  sentAtMs: number;
  untilMs: number;
  remaining: number;
  /** By the store's clock: when it read the bucket, and when the bucket is whole again. */
  readAtMs: number;
  resetAtMs: number;
}

/** A refusal the cache knows, as of now. */
export interface CachedRefusal {
  /** remaining and resetAtMs as the store read them (by its clock); retryAfterMs counted down to now. */
  outcome: BucketOutcome;
  /** When the store read them, by its clock. */
  readAtMs: number;
  /** How long from now until resetAtMs, counted on this instance's clock since the call was sent. */
  resetInMs: number;
}

/** What one entry holds beside its key's text (the entry, its node in the LRU list, the Map's slot), estimated. */
const ENTRY_BYTES = 200;
/** The bytes the cache holds at most, per entry it may keep: a short key's entry takes about 300. */
const ENTRY_BUDGET = 512;

export class OverLimitCache {
  private readonly entries: LruCache<string, Entry>;
  /**
   * How many entries each rule has. A bucket of a rule with none is not
   * looked up: that is every check of every rule nobody is over, and looking
   * one up built its id and hashed it for nothing (about 3% of the server's
   * instructions per check in a batch, by callgrind).
   */
  private readonly entriesOfRule = new Map<string, number>();

  constructor(maxEntries: number) {
    this.entries = new LruCache({
      maxEntries,
      maxWeight: maxEntries * ENTRY_BUDGET,
      // Two bytes a character: V8 keeps a text one byte a character only while it can.
      weigh: (id) => 2 * id.length + ENTRY_BYTES,
      onRemove: (_id, { ruleId }) => {
        const left = this.entriesOfRule.get(ruleId)! - 1;
        if (left === 0) this.entriesOfRule.delete(ruleId);
        else this.entriesOfRule.set(ruleId, left);
      },
    });
  }

  /**
   * The outcome the store would give for this bucket, if the cache knows it
   * refuses a request of `cost` at `nowMs`; null when it does not know.
   */
  refusal(bucket: BucketRef, cost: number, nowMs: number): CachedRefusal | null {
    if (!this.entriesOfRule.has(bucket.ruleId)) return null;
    const id = bucketId(bucket.ruleId, bucket.key);
    const entry = this.entries.get(id);
    if (entry === undefined) return null;
    if (entry.untilMs <= nowMs || !sameParams(entry.params, bucket.params)) {
      this.entries.delete(id);
      return null;
    }
    if (cost < entry.cost) return null;
    return {
      outcome: { conforming: false, remaining: entry.remaining, resetAtMs: entry.resetAtMs, retryAfterMs: entry.untilMs - nowMs, delayMs: 0 },
      readAtMs: entry.readAtMs,
      resetInMs: entry.resetAtMs - entry.readAtMs - (nowMs - entry.sentAtMs),
    };
  }

  /**
   * Learns from one bucket's outcome in a store's reply: a refusal by an
   * enforcing rule is kept until `sentAtMs + retryAfterMs`, sentAtMs being
   * this instance's clock when the call was sent, readAtMs the store's when
   * it decided (the reply's nowMs).
   */
  remember(bucket: BucketRef, cost: number, outcome: BucketOutcome, sentAtMs: number, readAtMs: number): void {
    if (outcome.conforming || outcome.retryAfterMs === null || outcome.retryAfterMs <= 0) return;
    if (bucket.params.action === "LOG_ONLY" || bucket.params.algorithm === "CONCURRENCY") return;
    const id = bucketId(bucket.ruleId, bucket.key);
    const known = this.entries.get(id);
    const untilMs = sentAtMs + outcome.retryAfterMs;
    if (known !== undefined && sameParams(known.params, bucket.params) && known.cost <= cost && known.untilMs >= untilMs) return;
    const entry: Entry = { ruleId: bucket.ruleId, params: bucket.params, cost, sentAtMs, untilMs, remaining: outcome.remaining, readAtMs, resetAtMs: outcome.resetAtMs };
    if (this.entries.set(id, entry)) this.entriesOfRule.set(bucket.ruleId, (this.entriesOfRule.get(bucket.ruleId) ?? 0) + 1);
  }

  /** Forgets a bucket (after resetLimit). */
  forget(ruleId: string, key: string): void {
    this.entries.delete(bucketId(ruleId, key));
  }

  get size(): number {
    return this.entries.size;
  }
}

function sameParams(a: LimitParams, b: LimitParams): boolean {
  return a === b || (a.algorithm === b.algorithm && a.limit === b.limit && a.windowMs === b.windowMs && a.capacity === b.capacity && a.action === b.action && sameCalendar(a.calendar, b.calendar));
}
