/**
 * Events across instances through Redis pub/sub, one channel per kind under
 * the key prefix:
 *
 *   <prefix>events:rule-changes   <prefix>events:bucket-resets
 *   <prefix>events:throttle       <prefix>events:near-limit
 *   <prefix>events:key-revocations   <prefix>events:access-list-changes
 *   <prefix>events:bans
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
 * within API_KEY_CACHE_MS; a lost access list change is made up for by the
 * periodic full reload of the lists (AccessListSync); a lost ban or unban by
 * each instance's periodic reload of the live bans (BanService); a lost
 * throttle event stays lost.
 */

import type { Cluster, Redis } from "ioredis";
import type { EventListener, EventMap, EventTopic } from "../../domain/events.js";
import type { EventBus, Unsubscribe } from "../../domain/ports.js";
import { InProcessEventBus } from "../memory/in-process-event-bus.js";

/** The wire format: other instances, of this version or another, listen on these names. */
const CHANNEL_NAMES: Record<EventTopic, string> = {
  ruleChange: "rule-changes",
  bucketReset: "bucket-resets",
  keyRevocation: "key-revocations",
  accessListChange: "access-list-changes",
  throttle: "throttle",
  nearLimit: "near-limit",
  ban: "bans",
};

/** The fields of RuleChange, Rule and the events that are Dates, which JSON carries as ISO strings. */
const DATE_FIELDS = new Set(["at", "createdAt", "updatedAt", "expiresAt", "until"]);

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
  private readonly channels: Record<EventTopic, string>;
  private readonly topics: Map<string, EventTopic>;

  /** Takes both clients over: a subscribed connection can do nothing but listen, so publishing needs the other. */
  constructor(
    private readonly publisher: Redis | Cluster,
    private readonly subscriber: Redis | Cluster,
    private readonly options: RedisEventBusOptions,
  ) {
    const topics = Object.keys(CHANNEL_NAMES) as EventTopic[];
    this.channels = Object.fromEntries(topics.map((topic) => [topic, `${options.prefix}events:${CHANNEL_NAMES[topic]}`])) as Record<EventTopic, string>;
    this.topics = new Map(topics.map((topic) => [this.channels[topic], topic]));
  }

  /** Subscribes to the channels; what others publish before this resolves is not seen. */
  async start(): Promise<void> {
    this.subscriber.on("message", (channel: string, message: string) => this.receive(channel, message));
    await this.subscriber.subscribe(...this.topics.keys());
  }

  /**
   * Delivers the event here at once, then hands it to Redis. A publish that
   * fails is reported, not thrown: what the event tells is done already (the
   * rule is stored, the bucket forgotten, the key revoked in the database),
   * and the other instances make up for it as the header says.
   */
  async publish<K extends EventTopic>(topic: K, event: EventMap[K]): Promise<void> {
    await this.local.publish(topic, event);
    await this.send(topic, event);
  }

  subscribe<K extends EventTopic>(topic: K, listener: EventListener<K>): Unsubscribe {
    return this.local.subscribe(topic, listener);
  }

  async close(): Promise<void> {
    await this.local.close();
    await Promise.allSettled([this.subscriber.quit(), this.publisher.quit()]);
  }

  private async send(topic: EventTopic, event: unknown): Promise<void> {
    const envelope: Envelope = { from: this.options.instanceId, event };
    try {
      await this.publisher.publish(this.channels[topic], JSON.stringify(envelope));
    } catch (error) {
      this.options.onError(error, `publishing to ${this.channels[topic]}`);
    }
  }

  private receive(channel: string, message: string): void {
    const topic = this.topics.get(channel);
    if (topic === undefined) return;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(message, (key, value: unknown) => (DATE_FIELDS.has(key) && typeof value === "string" ? new Date(value) : value));
    } catch (error) {
      this.options.onError(error, `reading a message on ${channel}`);
      return;
    }
    if (envelope.from === this.options.instanceId) return;
    void this.local.publish(topic, envelope.event as EventMap[EventTopic]);
  }
}
