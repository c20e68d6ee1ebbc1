/**
 * Refusals counted in Redis, shared by every instance on REDIS_KEY_PREFIX:
 *
 *   <prefix>refusals:<rule id>\n<bucket key>   a counter that expires with its period
 *
 * One MULTI: SET 0 PX <period> NX starts a period (only when none runs), INCR
 * counts in it and keeps its expiry. INCR is atomic, so of the instances
 * counting one bucket at once exactly one sees any given count, and so
 * exactly one reaches a rule's autoBan threshold.
 */

import type { Cluster, Redis } from "ioredis";
import type { RefusalCounter } from "../../domain/ports.js";

export class RedisRefusalCounter implements RefusalCounter {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  async count(id: string, periodMs: number): Promise<number> {
    const key = `${this.prefix}refusals:${id}`;
    const replies = await this.redis.multi().set(key, 0, "PX", periodMs, "NX").incr(key).exec();
    const failed = replies?.find(([error]) => error !== null);
    if (replies === null || failed) throw failed?.[0] ?? new Error("the refusal count's transaction was discarded");
    return Number(replies[1]![1]);
  }
}
