/**
 * Events within one process: the embedded mode's bus, and the local half of
 * every other bus. Listeners run synchronously; one that throws does not stop
 * the others.
 */

import type { EventListener, EventMap, EventTopic } from "../../domain/events.js";
import type { EventBus, Unsubscribe } from "../../domain/ports.js";

export class InProcessEventBus implements EventBus {
  private readonly listeners: { [K in EventTopic]: Set<EventListener<K>> } = {
    ruleChange: new Set(),
    bucketReset: new Set(),
    keyRevocation: new Set(),
    accessListChange: new Set(),
    throttle: new Set(),
    nearLimit: new Set(),
    ban: new Set(),
  };

  publish<K extends EventTopic>(topic: K, event: EventMap[K]): Promise<void> {
    for (const listener of this.listeners[topic]) {
      try {
        listener(event);
      } catch {
        // A broken listener must not keep the event from the others.
      }
    }
    return Promise.resolve();
  }

  subscribe<K extends EventTopic>(topic: K, listener: EventListener<K>): Unsubscribe {
    const listeners: Set<EventListener<K>> = this.listeners[topic];
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  async close(): Promise<void> {
    for (const listeners of Object.values(this.listeners)) listeners.clear();
  }
}
