/**
 * Events across instances through Redis pub/sub, one channel per kind under
 * the key prefix:
 *
 *   <prefix>events:rule-changes   <prefix>events:bucket-resets
 *   <prefix>events:throttle       <prefix>events:near-limit
 *   <prefix>events:key-revocations
 *
 * A message is JSON: {"from": "<instance id>", "event": {...}}. The
 * publishing instance delivers its own event to its listeners at once, so its
 * very next check sees its own rule change, and ignores the echo Redis sends
 * back to it; every other instance delivers what it receives. Below the
 * channels sits the same in-process bus the embedded mode uses.
 *
 * Pub/sub is fire-and-forget: an instance that is disconnected when a message
 * is sent never sees it. The periodic full reload of the rules (RuleSync)
 * makes up for a lost rule change; a lost bucket reset leaves that instance
 * refusing the bucket from its over-limit cache until the refusal would have
 * ended anyway; a lost key revocation is made up for by each instance
 * checking its cached keys and open sockets against the database again
 * within API_KEY_CACHE_MS; a lost throttle event stays lost.
 */

import type { Cluster, Redis } from "ioredis";
import type { BucketReset, KeyRevocation, NearLimitEvent, RuleChange, ThrottleEvent } from "../../domain/events.js";
import type { EventBus, Unsubscribe } from "../../domain/ports.js";
import { InProcessEventBus } from "../memory/in-process-event-bus.js";

type Kind = "ruleChange" | "bucketReset" | "keyRevocation" | "throttle" | "nearLimit";

const CHANNEL_NAMES: Record<Kind, string> = {
  ruleChange: "rule-changes",
  bucketReset: "bucket-resets",
  keyRevocation: "key-revocations",
  throttle: "throttle",
  nearLimit: "near-limit",
};

/** The fields of RuleChange, Rule and the events that are Dates, which JSON carries as ISO strings. */
const DATE_FIELDS = new Set(["at", "createdAt", "updatedAt"]);

interface Envelope {
  from: string;
  event: unknown;
}

export interface RedisEventBusOptions {
  /** REDIS_KEY_PREFIX: instances see each other's events when they share it. */
  prefix: string;
  /** Unique per running instance: how an instance recognises its own messages. */
  instanceId: string;
  /** A publish that failed, or a message that could not be read; the bus carries on. */
  onError: (error: unknown, what: string) => void;
}

export class RedisEventBus implements EventBus {
  private readonly local = new InProcessEventBus();
  private readonly channels: Record<Kind, string>;
  private readonly kinds: Map<string, Kind>;

  /** Takes both clients over: a subscribed connection can do nothing but listen, so publishing needs the other. */
  constructor(
    private readonly publisher: Redis | Cluster,
    private readonly subscriber: Redis | Cluster,
    private readonly options: RedisEventBusOptions,
  ) {
    const kinds = Object.keys(CHANNEL_NAMES) as Kind[];
    this.channels = Object.fromEntries(kinds.map((kind) => [kind, `${options.prefix}events:${CHANNEL_NAMES[kind]}`])) as Record<Kind, string>;
    this.kinds = new Map(kinds.map((kind) => [this.channels[kind], kind]));
  }

  /** Subscribes to the channels; what others publish before this resolves is not seen. */
  async start(): Promise<void> {
    this.subscriber.on("message", (channel: string, message: string) => this.receive(channel, message));
    await this.subscriber.subscribe(...this.kinds.keys());
  }

  /** Resolves once the change is delivered here and handed to Redis; a failed publish is reported, not thrown, since the change is stored and the next full reload carries it. */
  async publishRuleChange(change: RuleChange): Promise<void> {
    await this.local.publishRuleChange(change);
    await this.send("ruleChange", change);
  }

  /** Like a rule change: delivered here at once, then handed to Redis; a failed publish is reported, not thrown (the store has forgotten the bucket). */
  async publishBucketReset(reset: BucketReset): Promise<void> {
    await this.local.publishBucketReset(reset);
    await this.send("bucketReset", reset);
  }

  /** Like a rule change: delivered here at once, then handed to Redis; a failed publish is reported, not thrown (the key is revoked in the database). */
  async publishKeyRevocation(revocation: KeyRevocation): Promise<void> {
    await this.local.publishKeyRevocation(revocation);
    await this.send("keyRevocation", revocation);
  }

  publishThrottle(event: ThrottleEvent): void {
    this.local.publishThrottle(event);
    void this.send("throttle", event);
  }

  publishNearLimit(event: NearLimitEvent): void {
    this.local.publishNearLimit(event);
    void this.send("nearLimit", event);
  }

  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe {
    return this.local.onRuleChange(listener);
  }

  onBucketReset(listener: (reset: BucketReset) => void): Unsubscribe {
    return this.local.onBucketReset(listener);
  }

  onKeyRevocation(listener: (revocation: KeyRevocation) => void): Unsubscribe {
    return this.local.onKeyRevocation(listener);
  }

  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe {
    return this.local.onThrottle(listener);
  }

  onNearLimit(listener: (event: NearLimitEvent) => void): Unsubscribe {
    return this.local.onNearLimit(listener);
  }

  async close(): Promise<void> {
    await this.local.close();
    await Promise.allSettled([this.subscriber.quit(), this.publisher.quit()]);
  }

  private async send(kind: Kind, event: unknown): Promise<void> {
    const envelope: Envelope = { from: this.options.instanceId, event };
    try {
      await this.publisher.publish(this.channels[kind], JSON.stringify(envelope));
    } catch (error) {
      this.options.onError(error, `publishing to ${this.channels[kind]}`);
    }
  }

  private receive(channel: string, message: string): void {
    const kind = this.kinds.get(channel);
    if (kind === undefined) return;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(message, (key, value: unknown) => (DATE_FIELDS.has(key) && typeof value === "string" ? new Date(value) : value));
    } catch (error) {
      this.options.onError(error, `reading a message on ${channel}`);
      return;
    }
    if (envelope.from === this.options.instanceId) return;
    if (kind === "ruleChange") void this.local.publishRuleChange(envelope.event as RuleChange);
    else if (kind === "bucketReset") void this.local.publishBucketReset(envelope.event as BucketReset);
    else if (kind === "keyRevocation") void this.local.publishKeyRevocation(envelope.event as KeyRevocation);
    else if (kind === "throttle") this.local.publishThrottle(envelope.event as ThrottleEvent);
    else this.local.publishNearLimit(envelope.event as NearLimitEvent);
  }
}
