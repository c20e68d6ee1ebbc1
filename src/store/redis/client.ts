import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { RedisTopology } from "../../config/settings.js";

/**
 * A Redis client as the counter store needs it, for one Redis, a master found
 * through Sentinel, or a Redis Cluster: a rate limiter must answer fast or not
 * at all, so commands are never queued while disconnected and never retried;
 * ioredis reconnects in the background (every 500 ms at most) while the
 * circuit breaker decides what checks do. Deadlines per check are kept by the
 * caller (ResilientCounterStore); `commandTimeoutMs` only stops a command that
 * never gets an answer from being remembered forever.
 */
export function createRedisClient(topology: Extract<RedisTopology, { kind: "cluster" }>, commandTimeoutMs: number): Cluster;
export function createRedisClient(topology: Exclude<RedisTopology, { kind: "cluster" }>, commandTimeoutMs: number): Redis;
export function createRedisClient(topology: RedisTopology, commandTimeoutMs: number): Redis | Cluster;
export function createRedisClient(topology: RedisTopology, commandTimeoutMs: number): Redis | Cluster {
  const reconnect = (attempt: number) => Math.min(attempt * 50, 500);
  const options: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    retryStrategy: reconnect,
    lazyConnect: true,
  };
  switch (topology.kind) {
    case "single":
      return new Redis(topology.url, { ...options, enableAutoPipelining: true });
    case "sentinel":
      return new Redis({
        ...options,
        enableAutoPipelining: true,
        sentinels: topology.sentinels,
        name: topology.masterName,
        // Reconnect as soon as the sentinels announce a new master: a demoted
        // master that is still reachable takes writes until the sentinels
        // reconfigure it, which took 10 s on the test group.
        failoverDetector: true,
      });
    case "cluster":
      return new Cluster(topology.nodes, {
        // No auto-pipelining: the store sends each slot's command itself (see RedisCounterStore).
        enableAutoPipelining: false,
        // ioredis opens a node's connection on first use and, without this
        // queue, refuses every other command to that node until it is open;
        // the caller's deadline still bounds the wait.
        enableOfflineQueue: true,
        // A command to a lost node fails at once instead of being sent again
        // later: a late reserve would only count units nobody is waiting for.
        retryDelayOnFailover: 0,
        retryDelayOnClusterDown: 0,
        clusterRetryStrategy: reconnect,
        lazyConnect: true,
        redisOptions: { maxRetriesPerRequest: 0, commandTimeout: commandTimeoutMs },
      });
  }
}

/**
 * A connection for SUBSCRIBE next to `client`, to the same Redis: a subscribed
 * connection only listens, its SUBSCRIBE waits for a connection however long
 * that takes, and ioredis subscribes again after every reconnection (on a
 * cluster, on another node when its node is lost).
 */
export function createSubscriber(client: Redis | Cluster): Redis | Cluster {
  return client instanceof Cluster ? client.duplicate([], { enableOfflineQueue: true }) : client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
}
