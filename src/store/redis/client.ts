import { Cluster, Redis, type RedisOptions } from "ioredis";
import { NO_REDIS_SECURITY, type RedisSecurity, type RedisTopology } from "../../config/settings.js";

/**
 * A Redis client as the counter store needs it, for one Redis, a master found
 * through Sentinel, or a Redis Cluster: a rate limiter must answer fast or not
 * at all, so commands are never queued while disconnected and never retried;
 * ioredis reconnects in the background (every 500 ms at most) while the
 * circuit breakers decide what checks do. Deadlines per check are set by the
 * caller (ResilientCounterStore) and kept per command by RedisCounterStore;
 * `commandTimeoutMs` only stops a command that never gets an answer from being
 * remembered forever. `security` (credentials,
 * TLS) applies to every node the client reaches, including the ones a cluster
 * or the sentinels name later; the sentinels get their own credentials.
 *
 * No auto-pipelining on any topology: the store already sends an operation's
 * checks as one command (decide_each), and ioredis's auto-pipelining keeps
 * one pipeline in flight per connection, so a command issued while another
 * request's is out waits for its answer. Under load, with it on, 0.7–1.1 MB
 * of objects reached V8's old generation at each young collection, against
 * 4–12 KB without; without it a client's request or a batch costs the server
 * about two thirds of the CPU per check, a single check about a tenth more
 * (its command is a write of its own) (BENCHMARKS.md, "The Redis client").
 */
export function createRedisClient(topology: Extract<RedisTopology, { kind: "cluster" }>, commandTimeoutMs: number, security?: RedisSecurity): Cluster;
export function createRedisClient(topology: Exclude<RedisTopology, { kind: "cluster" }>, commandTimeoutMs: number, security?: RedisSecurity): Redis;
export function createRedisClient(topology: RedisTopology, commandTimeoutMs: number, security?: RedisSecurity): Redis | Cluster;
export function createRedisClient(topology: RedisTopology, commandTimeoutMs: number, security: RedisSecurity = NO_REDIS_SECURITY): Redis | Cluster {
  const reconnect = (attempt: number) => Math.min(attempt * 50, 500);
  // Every node: an ACL user (or the default user's password) and TLS. REDIS_URL's own credentials, if any, are ioredis's to read.
  const node: RedisOptions = {
    ...(security.username === null ? {} : { username: security.username }),
    ...(security.password === null ? {} : { password: security.password }),
    ...(security.tls === null ? {} : { tls: security.tls }),
  };
  const options: RedisOptions = {
    ...node,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    retryStrategy: reconnect,
    lazyConnect: true,
    enableAutoPipelining: false,
  };
  switch (topology.kind) {
    case "single":
      return new Redis(topology.url, options);
    case "sentinel":
      return new Redis({
        ...options,
        sentinels: topology.sentinels,
        name: topology.masterName,
        ...(security.sentinelUsername === null ? {} : { sentinelUsername: security.sentinelUsername }),
        ...(security.sentinelPassword === null ? {} : { sentinelPassword: security.sentinelPassword }),
        // The sentinels and the nodes they name speak TLS alike.
        ...(security.tls === null ? {} : { sentinelTLS: security.tls, enableTLSForSentinelMode: true }),
        // Reconnect as soon as the sentinels announce a new master: a demoted
        // master that is still reachable takes writes until the sentinels
        // reconfigure it, which took 10 s on the test group.
        failoverDetector: true,
      });
    case "cluster":
      return new Cluster(topology.nodes, {
        // The store sends each slot's command itself (see RedisCounterStore).
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
        redisOptions: { ...node, maxRetriesPerRequest: 0, commandTimeout: commandTimeoutMs },
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

/** TLS failures that no amount of waiting mends: the certificate, its name, or TLS where the server speaks none. */
const TLS_REFUSALS = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "HOSTNAME_MISMATCH",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERR_SSL_WRONG_VERSION_NUMBER",
  "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED",
  "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
]);

/**
 * What is wrong with the settings, for an error that says Redis will never
 * accept this client as configured (credentials refused, a certificate that
 * does not verify); null for errors that may pass by themselves (a node down,
 * a timeout). ioredis reports a Sentinel group's refusal inside "All
 * sentinels are unreachable… Last error: …", and a cluster's as the last
 * node's error. A server that wants a client certificate may first show as a
 * reset connection (the write races its alert), so that one is certain only
 * once the alert arrives.
 */
export function misconfiguration(error: unknown): string | null {
  if (!(error instanceof Error)) return null;
  const refusal = /\b(WRONGPASS|NOAUTH)\b.*/.exec(error.message)?.[0];
  if (refusal !== undefined) {
    const settings = error.message.startsWith("All sentinels")
      ? "REDIS_SENTINEL_USERNAME and REDIS_SENTINEL_PASSWORD"
      : "REDIS_USERNAME and REDIS_PASSWORD (or the user and password in REDIS_URL)";
    return `Redis refused the credentials (${refusal}): check ${settings}`;
  }
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && TLS_REFUSALS.has(code)) {
    return `TLS with Redis failed (${code}: ${error.message}): check rediss:// or REDIS_TLS, REDIS_TLS_CA_FILE, REDIS_TLS_SERVERNAME, REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE`;
  }
  return misconfiguration((error as { lastNodeError?: unknown }).lastNodeError);
}

export type StartConnection = { connected: true } | { connected: false; error: unknown } | { misconfigured: string };

/**
 * Connects a client as the service starts: connected; or not (Redis
 * unreachable: ioredis goes on trying in the background); or misconfigured,
 * when an error says Redis will never accept it, in which case the client is
 * disconnected. Settles at the first error, since a Sentinel client never
 * gives up connecting by itself.
 */
export function connectAtStart(client: Redis | Cluster): Promise<StartConnection> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: StartConnection) => {
      if (settled) return;
      settled = true;
      client.off("error", onError);
      client.off("node error", onNodeError);
      if ("misconfigured" in outcome) client.disconnect();
      resolve(outcome);
    };
    const onError = (error: unknown) => {
      const problem = misconfiguration(error);
      settle(problem === null ? { connected: false, error } : { misconfigured: problem });
    };
    // A cluster's node errors: one unreachable seed is no verdict yet, but a refusal is.
    const onNodeError = (error: unknown) => {
      const problem = misconfiguration(error);
      if (problem !== null) settle({ misconfigured: problem });
    };
    client.on("error", onError);
    client.on("node error", onNodeError);
    client.connect().then(() => settle({ connected: true }), onError);
  });
}
