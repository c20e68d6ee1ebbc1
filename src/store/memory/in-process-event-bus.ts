/**
 * Events within one process: the embedded mode's bus, and the local half of
 * every other bus. Listeners run synchronously; one that throws does not stop
 * the others.
 */

import type { RuleChange, ThrottleEvent } from "../../domain/events.js";
import type { EventBus, Unsubscribe } from "../../domain/ports.js";

export class InProcessEventBus implements EventBus {
  private readonly ruleListeners = new Set<(change: RuleChange) => void>();
  private readonly throttleListeners = new Set<(event: ThrottleEvent) => void>();

  async publishRuleChange(change: RuleChange): Promise<void> {
    deliver(this.ruleListeners, change);
  }

  publishThrottle(event: ThrottleEvent): void {
    deliver(this.throttleListeners, event);
  }

  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe {
    this.ruleListeners.add(listener);
    return () => this.ruleListeners.delete(listener);
  }

  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe {
    this.throttleListeners.add(listener);
    return () => this.throttleListeners.delete(listener);
  }

  async close(): Promise<void> {
    this.ruleListeners.clear();
    this.throttleListeners.clear();
  }
}

function deliver<T>(listeners: Set<(value: T) => void>, value: T): void {
  for (const listener of listeners) {
    try {
      listener(value);
    } catch {
      // A broken listener must not keep the event from the others.
    }
  }
}
