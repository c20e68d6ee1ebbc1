import type { Clock } from "../../src/domain/ports.js";

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private ms = Date.UTC(2026, 10, 30, 12, 0, 0)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}
