/**
 * type-graphql's PubSub over the event bus. A subscription's arguments arrive
 * as its topic id, so each subscriber's filter (tenant, rule, and whether it
 * may still receive them) is applied before an event enters that subscriber's
 * bounded buffer: nothing it did not ask for, or may no longer see, is ever
 * queued or sent to it.
 */

import type { PubSub } from "type-graphql";
import type { Invalidation, NearLimitEvent, RuleChange, ThrottleEvent } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";
import type { Telemetry } from "../domain/telemetry.js";
import { subscriberTooSlow } from "./errors.js";
import { eventStream } from "./event-stream.js";
import { listenForInvalidations } from "./invalidations.js";

export const Topic = {
  THROTTLE_EVENTS: "THROTTLE_EVENTS",
  NEAR_LIMIT_EVENTS: "NEAR_LIMIT_EVENTS",
  RULE_CHANGES: "RULE_CHANGES",
  INVALIDATIONS: "INVALIDATIONS",
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

/** Events a slow subscriber may fall behind by before its subscription ends with SUBSCRIBER_TOO_SLOW. */
export const SUBSCRIBER_BUFFER = 1000;

type Listen<T> = (listener: (event: T) => void) => Unsubscribe;

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
  const filtered = <T extends { tenantId: string; ruleId: string }>(listen: Listen<T>, { tenantId, ruleId, mayReceive }: EventFilter) => {
    const wanted = (event: T) =>
      (tenantId == null || event.tenantId === tenantId) && (ruleId == null || event.ruleId === ruleId) && mayReceive(event.tenantId);
    return stream<T>((push) => listen((event) => wanted(event) && push(event)));
  };
  return {
    publish(routingKey, payload) {
      if (routingKey === Topic.THROTTLE_EVENTS) events.publishThrottle(payload as ThrottleEvent);
      else if (routingKey === Topic.NEAR_LIMIT_EVENTS) events.publishNearLimit(payload as NearLimitEvent);
      else if (routingKey === Topic.RULE_CHANGES) void events.publishRuleChange(payload as RuleChange);
      else throw new Error(`unknown topic ${routingKey}`);
    },
    subscribe(routingKey, filter) {
      const wanted = filter as EventFilter;
      if (routingKey === Topic.THROTTLE_EVENTS) return filtered<ThrottleEvent>((l) => events.onThrottle(l), wanted);
      if (routingKey === Topic.NEAR_LIMIT_EVENTS) return filtered<NearLimitEvent>((l) => events.onNearLimit(l), wanted);
      if (routingKey === Topic.RULE_CHANGES) return filtered<RuleChange>((l) => events.onRuleChange(l), wanted);
      if (routingKey === Topic.INVALIDATIONS) return stream<Invalidation>((push) => listenForInvalidations(events, wanted, push));
      throw new Error(`unknown topic ${routingKey}`);
    },
  };
}
