import { Redis } from "ioredis";

/**
 * A Redis client as the counter store needs it: a rate limiter must answer
 * fast or not at all, so commands are never queued while disconnected and
 * never retried; ioredis reconnects in the background (every 500 ms at most)
 * while the circuit breaker decides what checks do. Deadlines per check are
 * kept by the caller (ResilientCounterStore); `commandTimeoutMs` only stops a
 * command that never gets an answer from being remembered forever.
 */
export function createRedisClient(url: string, commandTimeoutMs: number): Redis {
  return new Redis(url, {
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 50, 500),
    lazyConnect: true,
  });
}
