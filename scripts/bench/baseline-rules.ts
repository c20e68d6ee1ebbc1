/**
 * The baseline's three rules as rate-limiter-flexible limiters (per user, per
 * IP, per endpoint), on whatever ioredis-like client they are given: the
 * baseline server's Redis, or lua-bench's recorder of the commands they send.
 */

import { RateLimiterRedis } from "rate-limiter-flexible";
import { LIMITS, type Caller } from "./workload.js";

export interface BaselineRule {
  limiter: RateLimiterRedis;
  keyOf(caller: Caller): string;
}

/** `storeClient`: an ioredis client, as rate-limiter-flexible's own option takes it. */
export function baselineRules(storeClient: unknown, prefix: string): BaselineRule[] {
  const limiter = (name: string, points: number) => new RateLimiterRedis({ storeClient, keyPrefix: `${prefix}${name}`, points, duration: LIMITS.windowSeconds });
  return [
    { limiter: limiter("user", LIMITS.perUser), keyOf: (c) => c.userId },
    { limiter: limiter("ip", LIMITS.perIp), keyOf: (c) => c.ip },
    { limiter: limiter("endpoint", LIMITS.perEndpoint), keyOf: (c) => `${c.method} ${c.resource}` },
  ];
}
