/**
 * A circuit breaker for one shard of the counter store. After `failureThreshold`
 * consecutive failures it opens: calls are not attempted for `openMs`, so a
 * dead Redis costs a branch, not a timeout per request. Then it lets exactly
 * one call through (half-open): its success closes the breaker, its failure
 * opens it for another `openMs`. Everyone else keeps the fallback meanwhile.
 */

import type { Clock } from "./ports.js";

export type BreakerState = "closed" | "open" | "half-open";

export interface CircuitBreakerOptions {
  failureThreshold: number;
  openMs: number;
  clock: Clock;
  onStateChange?: (state: BreakerState) => void;
}

export class CircuitBreaker {
  private current: BreakerState = "closed";
  private failures = 0;
  private openedAt = 0;

  constructor(private readonly options: CircuitBreakerOptions) {}

  get state(): BreakerState {
    return this.current;
  }

  /** When an open breaker will let a trial call through. */
  get retryAtMs(): number {
    return this.openedAt + this.options.openMs;
  }

  /** Whether allows() would say yes now, without taking the half-open trial: for a call that needs several breakers' yes. */
  wouldAllow(): boolean {
    return this.current === "closed" || (this.current === "open" && this.options.clock.now() >= this.retryAtMs);
  }

  /** Whether to attempt a call now; in half-open state only the first caller gets true. */
  allows(): boolean {
    if (this.current === "closed") return true;
    if (this.current === "open" && this.options.clock.now() >= this.retryAtMs) {
      this.become("half-open");
      return true;
    }
    return false;
  }

  succeeded(): void {
    this.failures = 0;
    if (this.current !== "closed") this.become("closed");
  }

  failed(): void {
    this.failures++;
    if (this.current === "half-open" || (this.current === "closed" && this.failures >= this.options.failureThreshold)) {
      this.openedAt = this.options.clock.now();
      this.become("open");
    }
  }

  private become(state: BreakerState): void {
    this.current = state;
    this.options.onStateChange?.(state);
  }
}
