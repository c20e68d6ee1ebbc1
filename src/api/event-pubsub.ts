/**
 * type-graphql's PubSub over the event bus. A subscription's arguments arrive
 * as its topic id, so each subscriber's filter (tenant, rule, and whether it
 * may still receive them) is applied before an event enters that subscriber's
 * bounded buffer: nothing it did not ask for, or may no longer see, is ever
 * queued or sent to it.
 */

import type { PubSub } from "type-graphql";
import type { EventMap, EventTopic, Invalidation } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";
import { SUBSCRIBER_BUFFER } from "../domain/service-limits.js";
import type { Telemetry } from "../domain/telemetry.js";
import { subscriberTooSlow } from "./errors.js";
import { eventStream } from "./event-stream.js";
import { listenForInvalidations } from "./invalidations.js";

export const Topic = {
  THROTTLE_EVENTS: "THROTTLE_EVENTS",
  NEAR_LIMIT_EVENTS: "NEAR_LIMIT_EVENTS",
  RULE_CHANGES: "RULE_CHANGES",
  INVALIDATIONS: "INVALIDATIONS",
  BAN_EVENTS: "BAN_EVENTS",
} as const;

/** A subscription's arguments: which events it asks for. */
export interface EventArgs {
  tenantId?: string | null;
  ruleId?: string | null;
}

export interface EventFilter extends EventArgs {
  /** Asked again for every event, before it is queued: whether the subscriber may still receive its tenant's events (false once its key is revoked). */
  mayReceive: (tenantId: string) => boolean;
}

/** The event bus topic behind each subscription topic but INVALIDATIONS, which listens to two (see invalidations.ts). */
const BUS_TOPICS = {
  [Topic.THROTTLE_EVENTS]: "throttle",
  [Topic.NEAR_LIMIT_EVENTS]: "nearLimit",
  [Topic.RULE_CHANGES]: "ruleChange",
  [Topic.BAN_EVENTS]: "ban",
} as const satisfies Record<string, EventTopic>;

type BusTopic = (typeof BUS_TOPICS)[keyof typeof BUS_TOPICS];

function busTopicOf(routingKey: string): BusTopic {
  if (!Object.hasOwn(BUS_TOPICS, routingKey)) throw new Error(`unknown topic ${routingKey}`);
  return BUS_TOPICS[routingKey as keyof typeof BUS_TOPICS];
}

export function eventBusPubSub(events: EventBus, telemetry: Telemetry): PubSub {
  const stream = <T>(subscribe: (push: (event: T) => void) => Unsubscribe) => {
    telemetry.subscriptionOpened();
    return eventStream<T>(subscribe, {
      capacity: SUBSCRIBER_BUFFER,
      overflow: () => {
        telemetry.eventsDropped(SUBSCRIBER_BUFFER + 1);
        return subscriberTooSlow(SUBSCRIBER_BUFFER);
      },
      onClose: () => telemetry.subscriptionClosed(),
    });
  };
  const filtered = (topic: BusTopic, { tenantId, ruleId, mayReceive }: EventFilter) => {
    const wanted = (event: EventMap[BusTopic]) =>
      (tenantId == null || event.tenantId === tenantId) && (ruleId == null || event.ruleId === ruleId) && mayReceive(event.tenantId);
    return stream<EventMap[BusTopic]>((push) => events.subscribe(topic, (event) => wanted(event) && push(event)));
  };
  return {
    publish(routingKey, payload) {
      void events.publish(busTopicOf(routingKey), payload as EventMap[BusTopic]);
    },
    subscribe(routingKey, filter) {
      const wanted = filter as EventFilter;
      if (routingKey === Topic.INVALIDATIONS) return stream<Invalidation>((push) => listenForInvalidations(events, wanted, push));
      return filtered(busTopicOf(routingKey), wanted);
    },
  };
}
