/**
 * type-graphql's PubSub over the event bus. A subscription's arguments arrive
 * as its topic id, so each subscriber's filter (tenant, rule) is applied
 * before an event enters that subscriber's bounded buffer: nothing it did not
 * ask for is ever queued or sent to it.
 */

import type { PubSub } from "type-graphql";
import type { RuleChange, ThrottleEvent } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";
import type { Telemetry } from "../engine/telemetry.js";
import { eventStream } from "./event-stream.js";

export const Topic = {
  THROTTLE_EVENTS: "THROTTLE_EVENTS",
  RULE_CHANGES: "RULE_CHANGES",
} as const;

export interface EventFilter {
  tenantId?: string | null;
  ruleId?: string | null;
}

/** Events a slow subscriber may fall behind by before the oldest are dropped. */
export const SUBSCRIBER_BUFFER = 1000;

export function eventBusPubSub(events: EventBus, telemetry: Telemetry): PubSub {
  const stream = <T>(subscribe: (push: (event: T) => void) => Unsubscribe) => {
    telemetry.subscriptionOpened();
    return eventStream<T>(subscribe, {
      capacity: SUBSCRIBER_BUFFER,
      onDrop: (count) => telemetry.eventsDropped(count),
      onClose: () => telemetry.subscriptionClosed(),
    });
  };
  return {
    publish(routingKey, payload) {
      if (routingKey === Topic.THROTTLE_EVENTS) events.publishThrottle(payload as ThrottleEvent);
      else if (routingKey === Topic.RULE_CHANGES) void events.publishRuleChange(payload as RuleChange);
      else throw new Error(`unknown topic ${routingKey}`);
    },
    subscribe(routingKey, filter) {
      const { tenantId, ruleId } = (filter ?? {}) as EventFilter;
      const wanted = (event: { tenantId: string; ruleId: string }) =>
        (tenantId == null || event.tenantId === tenantId) && (ruleId == null || event.ruleId === ruleId);
      if (routingKey === Topic.THROTTLE_EVENTS) {
        return stream<ThrottleEvent>((push) => events.onThrottle((e) => wanted(e) && push(e)));
      }
      if (routingKey === Topic.RULE_CHANGES) {
        return stream<RuleChange>((push) => events.onRuleChange((c) => wanted(c) && push(c)));
      }
      throw new Error(`unknown topic ${routingKey}`);
    },
  };
}
