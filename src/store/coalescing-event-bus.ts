/**
 * Throttle and near-limit events under a flood. A bucket refusing 50,000
 * requests a second must not mean 50,000 messages a second on Redis and on
 * every dashboard, so this bus in front of the real one coalesces them per
 * (tenant, rule, bucket key, shadow) and interval:
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
 * The tenant is part of every coalescing key because a rule of tenant "*"
 * serves every tenant, and an event goes to the subscribers of the tenant
 * that made the request: its count must be that tenant's alone. (A "*" rule
 * with an empty scope is one bucket shared by every tenant, and its events
 * would otherwise add one tenant's denials to another's.)
 *
 * At most `maxKeys` buckets are tracked at once: events of any further bucket
 * are gathered per (tenant, rule, shadow) under the key OTHER_KEYS until an
 * interval frees room, in at most `maxKeys` such groups more. So memory and
 * the event rate stay bounded however many buckets an attack touches, and
 * still no event goes uncounted. Past both (more than maxKeys such groups in
 * one interval, which takes a caller checking for thousands of tenants at
 * once) an event goes out on its own, uncoalesced, rather than be counted
 * with another tenant's.
 *
 * Rule changes, bucket resets and key revocations pass straight through, and
 * so do listeners: this bus only shapes what the limiter publishes.
 */

import type { EventListener, EventMap, EventTopic } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";

/** The key of an event that stands for buckets beyond maxKeys; never a real bucket key (those are "*" or "label:value|..."). */
export const OTHER_KEYS = "(other keys)";

export interface CoalescingOptions {
  /** How often coalesced counts go out; 0: only when flush() is called (tests). */
  intervalMs: number;
  /** How many buckets are coalesced one by one before the rest are gathered per tenant and rule. */
  maxKeys: number;
}

interface Coalescible {
  tenantId: string;
  ruleId: string;
  key: string;
  shadow: boolean;
  count: number;
}

/** The topics this bus coalesces; every other passes straight through. */
type CoalescedTopic = "throttle" | "nearLimit";

export class CoalescingEventBus implements EventBus {
  private readonly coalescers: { [K in CoalescedTopic]: Coalescer<EventMap[K]> };
  private readonly timer: NodeJS.Timeout | null;

  constructor(
    private readonly inner: EventBus,
    options: CoalescingOptions,
  ) {
    this.coalescers = {
      throttle: new Coalescer((event) => void inner.publish("throttle", event), options.maxKeys),
      nearLimit: new Coalescer((event) => void inner.publish("nearLimit", event), options.maxKeys),
    };
    this.timer = options.intervalMs > 0 ? setInterval(() => this.flush(), options.intervalMs).unref() : null;
  }

  /** A throttle or near-limit event is counted (and resolves at once); any other goes straight to the bus behind. */
  publish<K extends EventTopic>(topic: K, event: EventMap[K]): Promise<void> {
    if (!isCoalesced(topic)) return this.inner.publish(topic, event);
    (this.coalescers[topic] as Coalescer<EventMap[CoalescedTopic]>).add(event as EventMap[CoalescedTopic]);
    return Promise.resolve();
  }

  subscribe<K extends EventTopic>(topic: K, listener: EventListener<K>): Unsubscribe {
    return this.inner.subscribe(topic, listener);
  }

  /** Ends the interval: publishes what was counted since the last flush. */
  flush(): void {
    this.coalescers.throttle.flush();
    this.coalescers.nearLimit.flush();
  }

  /** Publishes what is still counted, then closes the bus behind it. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.flush();
    await this.inner.close();
  }
}

function isCoalesced(topic: EventTopic): topic is CoalescedTopic {
  return topic === "throttle" || topic === "nearLimit";
}

class Coalescer<E extends Coalescible> {
  /** Per bucket: the latest event and what arrived since the last one published. */
  private readonly buckets = new Map<string, { latest: E; unpublished: number }>();

  constructor(
    private readonly publish: (event: E) => void,
    private readonly maxKeys: number,
  ) {}

  add(original: E): void {
    let event = original;
    let id = coalescingId(event);
    let bucket = this.buckets.get(id);
    if (bucket === undefined && this.buckets.size >= this.maxKeys) {
      event = { ...original, key: OTHER_KEYS };
      id = coalescingId(event);
      bucket = this.buckets.get(id);
      if (bucket === undefined && this.buckets.size >= 2 * this.maxKeys) {
        this.publish(original);
        return;
      }
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

/** Tenant ids, rule ids and bucket keys hold no control characters, so the parts cannot run into each other. */
function coalescingId({ tenantId, ruleId, key, shadow }: Coalescible): string {
  return `${tenantId}\n${ruleId}\n${key}\n${shadow ? "shadow" : "enforce"}`;
}
