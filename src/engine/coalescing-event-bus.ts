/**
 * Throttle and near-limit events under a flood. A bucket refusing 50,000
 * requests a second must not mean 50,000 messages a second on Redis and on
 * every dashboard, so this bus in front of the real one coalesces them per
 * (rule, bucket key, shadow) and interval:
 *
 *   - the first event of a bucket goes out at once: a dashboard sees a
 *     throttle as it starts;
 *   - the ones after it are only counted, and at the end of each interval one
 *     event (the latest, with their count) goes out;
 *   - a bucket quiet for a whole interval is forgotten.
 *
 * Under a flood on one key that is one event per interval, and the counts of
 * the events published add up to exactly the number of events recorded.
 *
 * At most `maxKeys` buckets are tracked at once: events of any further bucket
 * are gathered per (rule, shadow) under the key OTHER_KEYS until an interval
 * frees room. So memory and the event rate stay bounded however many buckets
 * an attack touches, and still no event goes uncounted.
 *
 * Rule changes pass straight through, and so do listeners: this bus only
 * shapes what the limiter publishes.
 */

import type { BucketReset, KeyRevocation, NearLimitEvent, RuleChange, ThrottleEvent } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";

/** The key of an event that stands for buckets beyond maxKeys; never a real bucket key (those are "*" or "label:value|..."). */
export const OTHER_KEYS = "(other keys)";

export interface CoalescingOptions {
  /** How often coalesced counts go out; 0: only when flush() is called (tests). */
  intervalMs: number;
  /** How many buckets are coalesced one by one before the rest are gathered per rule. */
  maxKeys: number;
}

interface Coalescible {
  ruleId: string;
  key: string;
  shadow: boolean;
  count: number;
}

export class CoalescingEventBus implements EventBus {
  private readonly throttles: Coalescer<ThrottleEvent>;
  private readonly nearLimits: Coalescer<NearLimitEvent>;
  private readonly timer: NodeJS.Timeout | null;

  constructor(
    private readonly inner: EventBus,
    options: CoalescingOptions,
  ) {
    this.throttles = new Coalescer((event) => inner.publishThrottle(event), options.maxKeys);
    this.nearLimits = new Coalescer((event) => inner.publishNearLimit(event), options.maxKeys);
    this.timer = options.intervalMs > 0 ? setInterval(() => this.flush(), options.intervalMs).unref() : null;
  }

  publishThrottle(event: ThrottleEvent): void {
    this.throttles.add(event);
  }

  publishNearLimit(event: NearLimitEvent): void {
    this.nearLimits.add(event);
  }

  /** Ends the interval: publishes what was counted since the last flush. */
  flush(): void {
    this.throttles.flush();
    this.nearLimits.flush();
  }

  publishRuleChange(change: RuleChange): Promise<void> {
    return this.inner.publishRuleChange(change);
  }

  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe {
    return this.inner.onRuleChange(listener);
  }

  publishBucketReset(reset: BucketReset): Promise<void> {
    return this.inner.publishBucketReset(reset);
  }

  onBucketReset(listener: (reset: BucketReset) => void): Unsubscribe {
    return this.inner.onBucketReset(listener);
  }

  publishKeyRevocation(revocation: KeyRevocation): Promise<void> {
    return this.inner.publishKeyRevocation(revocation);
  }

  onKeyRevocation(listener: (revocation: KeyRevocation) => void): Unsubscribe {
    return this.inner.onKeyRevocation(listener);
  }

  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe {
    return this.inner.onThrottle(listener);
  }

  onNearLimit(listener: (event: NearLimitEvent) => void): Unsubscribe {
    return this.inner.onNearLimit(listener);
  }

  /** Publishes what is still counted, then closes the bus behind it. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.flush();
    await this.inner.close();
  }
}

class Coalescer<E extends Coalescible> {
  /** Per bucket: the latest event and what arrived since the last one published. */
  private readonly buckets = new Map<string, { latest: E; unpublished: number }>();

  constructor(
    private readonly publish: (event: E) => void,
    private readonly maxKeys: number,
  ) {}

  add(event: E): void {
    let id = bucketId(event.ruleId, event.key, event.shadow);
    let bucket = this.buckets.get(id);
    if (bucket === undefined && this.buckets.size >= this.maxKeys) {
      event = { ...event, key: OTHER_KEYS };
      id = bucketId(event.ruleId, OTHER_KEYS, event.shadow);
      bucket = this.buckets.get(id);
    }
    if (bucket === undefined) {
      this.buckets.set(id, { latest: event, unpublished: 0 });
      this.publish(event);
      return;
    }
    bucket.latest = event;
    bucket.unpublished += event.count;
  }

  flush(): void {
    for (const [id, bucket] of this.buckets) {
      if (bucket.unpublished === 0) {
        this.buckets.delete(id);
        continue;
      }
      this.publish({ ...bucket.latest, count: bucket.unpublished });
      bucket.unpublished = 0;
    }
  }
}

/** Rule ids and bucket keys hold no control characters, so the parts cannot run into each other. */
function bucketId(ruleId: string, key: string, shadow: boolean): string {
  return `${ruleId}\n${key}\n${shadow ? "shadow" : "enforce"}`;
}
