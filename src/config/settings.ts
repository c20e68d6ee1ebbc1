/**
 * Every setting, read once from the environment into one typed object. A bad
 * value stops the start with a message naming the variable.
 */

import { resolve } from "node:path";

export interface Settings {
  port: number;
  host: string;
  /** Postgres for rules; null: embedded PGlite under dataDir. */
  databaseUrl: string | null;
  /** Where embedded storage keeps its files; null (DATA_DIR=memory://): in memory only, gone at exit. */
  dataDir: string | null;
  /** Where the counters live; null: in this process's memory. */
  redis: RedisTopology | null;
  redisKeyPrefix: string;
  /** Page pairs per rule that buckets are spread over (changing it forgets every counter). */
  redisPages: number;
  /** Longest wait for any Redis call before the check is decided by failureMode. */
  redisTimeoutMs: number;
  /** Consecutive Redis failures that open the circuit breaker. */
  breakerFailures: number;
  /** How long an open breaker skips Redis before trying it again. */
  breakerOpenMs: number;
  /** Instances sharing each LOCAL rule's limit while Redis is unreachable. */
  instances: number;
  /** How often to try the rule database again after starting from the snapshot. */
  ruleRetryMs: number;
  /** A bootstrap token with every right; null: none (embedded mode generates one, see admin-token.ts). */
  adminToken: string | null;
  /** How long a looked-up API key is remembered (how long a revocation takes to reach other instances). */
  apiKeyCacheMs: number;
  /** Rule and key changes one API key may make per minute (Floodgate limits its own admin API). */
  adminMutationsPerMinute: number;
  /** How often every rule is reloaded from the database, the safety net under pushed rule changes. */
  ruleReloadIntervalMs: number;
  /** A rules file (YAML) imported on start; null: none. */
  rulesFile: string | null;
  /** Throttle and near-limit events are coalesced per rule, bucket and shadow over this interval. */
  eventIntervalMs: number;
  /** Buckets coalesced one by one per interval; events of further buckets are gathered per rule. */
  eventMaxKeys: number;
  production: boolean;
  logLevel: string;
  introspection: boolean;
  maxBodyBytes: number;
  /** Deepest nesting a GraphQL document may have. */
  maxQueryDepth: number;
  /** Most field selections a GraphQL document may make in all. */
  maxQueryFields: number;
  /** How long shutdown waits for requests in flight before closing their connections. */
  shutdownTimeoutMs: number;
  /** Buckets the over-limit cache remembers at most; 0 turns it off. */
  overLimitCacheSize: number;
  /** Check documents kept compiled for the fast path past Apollo; 0 turns the fast path off. */
  fastPathCacheSize: number;
  /** Subscriptions one WebSocket may hold at once. */
  maxSubscriptionsPerSocket: number;
  /** WebSockets one API key (or ADMIN_TOKEN) may hold open at once on one instance. */
  maxSocketsPerKey: number;
}

export interface HostPort {
  host: string;
  port: number;
}

/** One Redis (REDIS_URL), a Redis Cluster (REDIS_CLUSTER_NODES), or a master found through Redis Sentinel (REDIS_SENTINELS). */
export type RedisTopology =
  | { kind: "single"; url: string }
  | { kind: "cluster"; nodes: HostPort[] }
  | { kind: "sentinel"; sentinels: HostPort[]; masterName: string };

export class SettingsError extends Error {}

const IN_MEMORY = "memory://";

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const production = env.NODE_ENV === "production";
  return {
    port: integer(env, "PORT", 4000, 0, 65535),
    host: env.HOST || "0.0.0.0",
    databaseUrl: url(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    dataDir: env.DATA_DIR === IN_MEMORY ? null : resolve(env.DATA_DIR || ".data"),
    redis: redisTopology(env),
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? "fg:",
    redisPages: integer(env, "REDIS_PAGES", 16384, 1, 1 << 20),
    redisTimeoutMs: integer(env, "REDIS_TIMEOUT_MS", 50, 1, 60_000),
    breakerFailures: integer(env, "REDIS_BREAKER_FAILURES", 3, 1, 1000),
    breakerOpenMs: integer(env, "REDIS_BREAKER_OPEN_MS", 1000, 10, 600_000),
    instances: integer(env, "INSTANCE_COUNT", 1, 1, 100_000),
    ruleRetryMs: integer(env, "RULES_RETRY_MS", 2000, 10, 600_000),
    adminToken: secret(env, "ADMIN_TOKEN"),
    apiKeyCacheMs: integer(env, "API_KEY_CACHE_MS", 5000, 0, 600_000),
    adminMutationsPerMinute: integer(env, "ADMIN_MUTATIONS_PER_MINUTE", 300, 1, 1_000_000),
    ruleReloadIntervalMs: integer(env, "RULE_RELOAD_SECONDS", 30, 1, 86400) * 1000,
    rulesFile: env.RULES_FILE ? resolve(env.RULES_FILE) : null,
    eventIntervalMs: integer(env, "EVENT_INTERVAL_MS", 1000, 10, 60_000),
    eventMaxKeys: integer(env, "EVENT_MAX_KEYS", 10_000, 1, 1_000_000),
    production,
    logLevel: env.LOG_LEVEL || "info",
    introspection: boolean(env, "INTROSPECTION", !production),
    maxBodyBytes: integer(env, "MAX_BODY_BYTES", 1 << 20, 1024, 64 << 20),
    maxQueryDepth: integer(env, "MAX_QUERY_DEPTH", 12, 2, 100),
    maxQueryFields: integer(env, "MAX_QUERY_FIELDS", 5000, 10, 1_000_000),
    shutdownTimeoutMs: integer(env, "SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000),
    overLimitCacheSize: integer(env, "OVER_LIMIT_CACHE_SIZE", 100_000, 0, 10_000_000),
    fastPathCacheSize: integer(env, "FAST_PATH_CACHE_SIZE", 1000, 0, 1_000_000),
    maxSubscriptionsPerSocket: integer(env, "MAX_SUBSCRIPTIONS_PER_SOCKET", 50, 1, 100_000),
    maxSocketsPerKey: integer(env, "MAX_SOCKETS_PER_KEY", 20, 1, 1_000_000),
  };
}

function redisTopology(env: NodeJS.ProcessEnv): RedisTopology | null {
  const given = ["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"].filter((name) => env[name]);
  if (given.length > 1) throw new SettingsError(`set only one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS (got ${given.join(" and ")})`);
  const masterName = env.REDIS_SENTINEL_MASTER || null;
  if (masterName !== null && !env.REDIS_SENTINELS) throw new SettingsError("REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not");
  const single = url(env, "REDIS_URL", ["redis:", "rediss:"]);
  if (single !== null) return { kind: "single", url: single };
  const nodes = hostPorts(env, "REDIS_CLUSTER_NODES");
  if (nodes !== null) return { kind: "cluster", nodes };
  const sentinels = hostPorts(env, "REDIS_SENTINELS");
  if (sentinels === null) return null;
  if (masterName === null) throw new SettingsError("REDIS_SENTINEL_MASTER must name the master the sentinels watch (REDIS_SENTINELS is set)");
  return { kind: "sentinel", sentinels, masterName };
}

/** "host:port,host:port", IPv6 hosts in brackets ("[::1]:7000"). */
function hostPorts(env: NodeJS.ProcessEnv, name: string): HostPort[] | null {
  const raw = env[name];
  if (raw === undefined || raw === "") return null;
  return raw.split(",").map((entry) => {
    const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(entry.trim());
    const port = Number(match?.[3]);
    if (!match || port < 1 || port > 65535) {
      throw new SettingsError(`${name} must be comma-separated host:port pairs (got ${JSON.stringify(entry.trim())})`);
    }
    return { host: (match[1] ?? match[2])!, port };
  });
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new SettingsError(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
  }
  return value;
}

function secret(env: NodeJS.ProcessEnv, name: string): string | null {
  const raw = env[name];
  if (raw === undefined || raw === "") return null;
  if (raw.length < 16 || /\s/.test(raw)) throw new SettingsError(`${name} must be at least 16 characters, without spaces`);
  return raw;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (["1", "true", "yes", "on"].includes(raw.toLowerCase())) return true;
  if (["0", "false", "no", "off"].includes(raw.toLowerCase())) return false;
  throw new SettingsError(`${name} must be true or false (got ${JSON.stringify(raw)})`);
}

function url(env: NodeJS.ProcessEnv, name: string, protocols: string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === "") return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new SettingsError(`${name} is not a URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new SettingsError(`${name} must start with ${protocols.map((p) => `${p}//`).join(" or ")} (got ${parsed.protocol}//)`);
  }
  return raw;
}
