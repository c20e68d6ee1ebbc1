/**
 * Refusals counted in this process (embedded mode: it is the only instance).
 * A period ends by the clock; ended periods are dropped when the map grows,
 * so memory stays bounded by the buckets refused within one period.
 */

import type { Clock, RefusalCounter } from "../../domain/ports.js";

/** Past this many periods held, ended ones are dropped on the next count. */
const PRUNE_ABOVE = 10_000;

export class MemoryRefusalCounter implements RefusalCounter {
  private readonly periods = new Map<string, { count: number; endsAtMs: number }>();

  constructor(private readonly clock: Clock) {}

  count(id: string, periodMs: number): Promise<number> {
    const nowMs = this.clock.now();
    if (this.periods.size > PRUNE_ABOVE) this.prune(nowMs);
    let period = this.periods.get(id);
    if (period === undefined || period.endsAtMs <= nowMs) this.periods.set(id, (period = { count: 0, endsAtMs: nowMs + periodMs }));
    period.count += 1;
    return Promise.resolve(period.count);
  }

  private prune(nowMs: number): void {
    for (const [id, period] of this.periods) if (period.endsAtMs <= nowMs) this.periods.delete(id);
  }
}
