/**
 * Events within one process: the embedded mode's bus, and the local half of
 * every other bus. Listeners run synchronously; one that throws does not stop
 * the others.
 */

import type { BucketReset, KeyRevocation, NearLimitEvent, RuleChange, ThrottleEvent } from "../../domain/events.js";
import type { EventBus, Unsubscribe } from "../../domain/ports.js";

export class InProcessEventBus implements EventBus {
  private readonly ruleListeners = new Listeners<RuleChange>();
  private readonly resetListeners = new Listeners<BucketReset>();
  private readonly revocationListeners = new Listeners<KeyRevocation>();
  private readonly throttleListeners = new Listeners<ThrottleEvent>();
  private readonly nearLimitListeners = new Listeners<NearLimitEvent>();

  async publishRuleChange(change: RuleChange): Promise<void> {
    this.ruleListeners.deliver(change);
  }

  async publishBucketReset(reset: BucketReset): Promise<void> {
    this.resetListeners.deliver(reset);
  }

  async publishKeyRevocation(revocation: KeyRevocation): Promise<void> {
    this.revocationListeners.deliver(revocation);
  }

  publishThrottle(event: ThrottleEvent): void {
    this.throttleListeners.deliver(event);
  }

  publishNearLimit(event: NearLimitEvent): void {
    this.nearLimitListeners.deliver(event);
  }

  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe {
    return this.ruleListeners.add(listener);
  }

  onBucketReset(listener: (reset: BucketReset) => void): Unsubscribe {
    return this.resetListeners.add(listener);
  }

  onKeyRevocation(listener: (revocation: KeyRevocation) => void): Unsubscribe {
    return this.revocationListeners.add(listener);
  }

  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe {
    return this.throttleListeners.add(listener);
  }

  onNearLimit(listener: (event: NearLimitEvent) => void): Unsubscribe {
    return this.nearLimitListeners.add(listener);
  }

  async close(): Promise<void> {
    this.ruleListeners.clear();
    this.resetListeners.clear();
    this.revocationListeners.clear();
    this.throttleListeners.clear();
    this.nearLimitListeners.clear();
  }
}

class Listeners<T> {
  private readonly listeners = new Set<(value: T) => void>();

  add(listener: (value: T) => void): Unsubscribe {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  deliver(value: T): void {
    for (const listener of this.listeners) {
      try {
        listener(value);
      } catch {
        // A broken listener must not keep the event from the others.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
