/**
 * Every setting, read once from the environment into one typed object. A bad
 * value stops the start with a message naming the variable.
 */

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { PARTITION_MODES, type PartitionMode } from "../domain/regions.js";
import { DEFAULT_RULE_LIMITS, type RuleLimits } from "../domain/service-limits.js";

export interface Settings {
  port: number;
  host: string;
  /** A listener of its own serving GET /metrics without a token (for a scrape network); null: none, /metrics only on the API port, with a token. */
  metricsListener: { port: number; host: string } | null;
  /** A secret that opens GET /metrics on the API port and nothing else (for Prometheus); null: only ADMIN keys read metrics there. */
  metricsToken: string | null;
  /** Postgres for rules; null: embedded PGlite under dataDir. */
  databaseUrl: string | null;
  /** Where embedded storage keeps its files; null (DATA_DIR=memory://): in memory only, gone at exit. */
  dataDir: string | null;
  /** Where the counters live; null: in this process's memory. */
  redis: RedisTopology | null;
  /** How to authenticate to every Redis node and whether to speak TLS to it. */
  redisSecurity: RedisSecurity;
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
  /** How often to try the rule database again after starting from the snapshot (RULE_RETRY_MS). */
  ruleRetryMs: number;
  /** A bootstrap token with every right; null: none (embedded mode generates one, see admin-token.ts). */
  adminToken: string | null;
  /** How long a looked-up API key is remembered (how long a revocation takes to reach other instances). */
  apiKeyCacheMs: number;
  /** Rule and key changes one API key may make per minute (Floodgate limits its own admin API). */
  adminMutationsPerMinute: number;
  /** How often every rule is reloaded from the database, the safety net under pushed rule changes (RULE_RELOAD_MS). */
  ruleReloadIntervalMs: number;
  /** A rules file (YAML) imported on start; null: none. */
  rulesFile: string | null;
  /** Throttle and near-limit events are coalesced per rule, bucket and shadow over this interval. */
  eventIntervalMs: number;
  /** Buckets coalesced one by one per interval; events of further buckets are gathered per tenant and rule. */
  eventMaxKeys: number;
  production: boolean;
  logLevel: string;
  introspection: boolean;
  /** GraphiQL served to a browser that GETs /graphql (GRAPHIQL). */
  graphiql: boolean;
  maxBodyBytes: number;
  /** Deepest nesting a GraphQL document may have. */
  maxQueryDepth: number;
  /** Most field selections a GraphQL document may make in all. */
  maxQueryFields: number;
  /** How long shutdown waits for requests in flight before closing their connections. */
  shutdownTimeoutMs: number;
  /** Buckets the over-limit cache remembers at most; 0 turns it off. */
  overLimitCacheSize: number;
  /** Leased budgets (Redis only): a bucket checked this often per second on one instance is leased; 0 turns them off. */
  leaseHotChecksPerSecond: number;
  /** How much of an instance's traffic on a hot bucket one lease covers, in milliseconds of it. */
  leaseMs: number;
  /** The longest a lease lives: how stale what a leased decision reports may be. */
  leaseMaxMs: number;
  /** This instance's region and the others (src/store/regions); null: one region, GLOBAL rules are REGIONAL. */
  regions: RegionSettings | null;
  /** Check documents kept compiled for the fast path past Apollo; 0 turns the fast path off. */
  fastPathCacheSize: number;
  /** What those may hold in all, in bytes (estimated from the fields each compiled document selects). */
  fastPathCacheBytes: number;
  /** Subscriptions one WebSocket may hold at once. */
  maxSubscriptionsPerSocket: number;
  /** WebSockets one API key (or ADMIN_TOKEN) may hold open at once on one instance. */
  maxSocketsPerKey: number;
  /** How often this instance adds its usage counts to the usage store (the dashboard's charts); 0: usage is not counted. */
  usageFlushMs: number;
  /** The Envoy rate limit service over gRPC (GRPC_PORT); null: off. */
  grpc: GrpcSettings | null;
  /** Rules per tenant (MAX_RULES_PER_TENANT), and the largest import in rules (MAX_IMPORT_RULES) and bytes (MAX_IMPORT_BYTES). */
  ruleLimits: RuleLimits;
  /** A warning for each setting given under its former name, naming the new one: logged at start. */
  deprecations: string[];
}

/** REGION, REGION_PEERS and how the regions stay in step. */
export interface RegionSettings {
  /** REGION: this instance's region. */
  name: string;
  /** REGION_PEERS: every other region's name and Redis (redis:// or rediss://). */
  peers: { name: string; url: string }[];
  /** REGION_SYNC_MS: how often each instance ships its region's counts of GLOBAL buckets to the others. */
  syncMs: number;
  /** REGION_PARTITION_AFTER_MS: how long a region may go unheard, or unreachable, before it counts as cut off. */
  partitionAfterMs: number;
  /** REGION_PARTITION_MODE: how GLOBAL rules decide while cut off. */
  partitionMode: PartitionMode;
}

/** GRPC_PORT and what goes with it: the Envoy rate limit service (docs/envoy.md). */
export interface GrpcSettings {
  port: number;
  /** GRPC_HOST, HOST by default. */
  host: string;
  /** GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE (PEM, read at start); null: plaintext. */
  tls: { cert: string; key: string } | null;
  /** GRPC_DOMAINS: the tenant each Envoy domain stands for; a domain not listed is the tenant of the same name. */
  domainTenants: ReadonlyMap<string, string>;
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

/**
 * Credentials and TLS for Redis, the same for every node of the topology.
 * REDIS_URL may carry its own user and password, and rediss:// turns TLS on;
 * a cluster or a Sentinel group takes them from REDIS_USERNAME,
 * REDIS_PASSWORD and REDIS_TLS.
 */
export interface RedisSecurity {
  /** An ACL user (REDIS_USERNAME); null: the default user. */
  username: string | null;
  /** REDIS_PASSWORD: the user's password (or requirepass); null: none, or the one in REDIS_URL. */
  password: string | null;
  /** TLS for every connection (sentinels included); null: plain TCP. */
  tls: RedisTls | null;
  /** The sentinels' own credentials (REDIS_SENTINEL_USERNAME, REDIS_SENTINEL_PASSWORD), when they require any. */
  sentinelUsername: string | null;
  sentinelPassword: string | null;
}

/** Node TLS options: certificates as read from their files at start. */
export interface RedisTls {
  /** REDIS_TLS_CA_FILE: the CAs to verify the servers with; absent: Node's own list. */
  ca?: string;
  /** REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE: a client certificate, for servers that ask for one. */
  cert?: string;
  key?: string;
  /** REDIS_TLS_SERVERNAME: the name the servers' certificates must carry, when it is not the address connected to. */
  servername?: string;
}

export const NO_REDIS_SECURITY: RedisSecurity = { username: null, password: null, tls: null, sentinelUsername: null, sentinelPassword: null };

export class SettingsError extends Error {}

const IN_MEMORY = "memory://";

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const deprecations: string[] = [];
  const production = env.NODE_ENV === "production";
  const port = integer(env, "PORT", 4000, 0, 65535);
  return {
    port,
    host: env.HOST || "0.0.0.0",
    metricsListener: metricsListener(env, port),
    metricsToken: secret(env, "METRICS_TOKEN"),
    databaseUrl: databaseUrl(env),
    dataDir: env.DATA_DIR === IN_MEMORY ? null : resolve(env.DATA_DIR || ".data"),
    redis: redisTopology(env),
    redisSecurity: redisSecurity(env),
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? "fg:",
    redisPages: integer(env, "REDIS_PAGES", 16384, 1, 1 << 20),
    redisTimeoutMs: integer(env, "REDIS_TIMEOUT_MS", 50, 1, 60_000),
    breakerFailures: integer(env, "REDIS_BREAKER_FAILURES", 3, 1, 1000),
    breakerOpenMs: integer(env, "REDIS_BREAKER_OPEN_MS", 1000, 10, 600_000),
    instances: integer(env, "INSTANCE_COUNT", 1, 1, 100_000),
    ruleRetryMs: renamedInteger(env, "RULE_RETRY_MS", 2000, 10, 600_000, { name: "RULES_RETRY_MS", unit: 1 }, deprecations),
    adminToken: secret(env, "ADMIN_TOKEN"),
    apiKeyCacheMs: integer(env, "API_KEY_CACHE_MS", 5000, 0, 600_000),
    adminMutationsPerMinute: integer(env, "ADMIN_MUTATIONS_PER_MINUTE", 300, 1, 1_000_000),
    ruleReloadIntervalMs: renamedInteger(env, "RULE_RELOAD_MS", 30_000, 1000, 86_400_000, { name: "RULE_RELOAD_SECONDS", unit: 1000 }, deprecations),
    rulesFile: env.RULES_FILE ? resolve(env.RULES_FILE) : null,
    eventIntervalMs: integer(env, "EVENT_INTERVAL_MS", 1000, 10, 60_000),
    eventMaxKeys: integer(env, "EVENT_MAX_KEYS", 10_000, 1, 1_000_000),
    production,
    logLevel: env.LOG_LEVEL || "info",
    introspection: boolean(env, "INTROSPECTION", !production),
    graphiql: boolean(env, "GRAPHIQL", !production),
    maxBodyBytes: integer(env, "MAX_BODY_BYTES", 1 << 20, 1024, 64 << 20),
    maxQueryDepth: integer(env, "MAX_QUERY_DEPTH", 12, 2, 100),
    maxQueryFields: integer(env, "MAX_QUERY_FIELDS", 5000, 10, 1_000_000),
    shutdownTimeoutMs: integer(env, "SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000),
    overLimitCacheSize: integer(env, "OVER_LIMIT_CACHE_SIZE", 100_000, 0, 10_000_000),
    leaseHotChecksPerSecond: integer(env, "LEASE_HOT_CHECKS_PER_SECOND", 0, 0, 10_000_000),
    leaseMs: integer(env, "LEASE_MS", 100, 1, 1000),
    leaseMaxMs: integer(env, "LEASE_MAX_MS", 1000, 1, 60_000),
    regions: regionSettings(env),
    fastPathCacheSize: integer(env, "FAST_PATH_CACHE_SIZE", 1000, 0, 1_000_000),
    fastPathCacheBytes: integer(env, "FAST_PATH_CACHE_BYTES", 64 << 20, 1 << 20, 2 ** 40),
    maxSubscriptionsPerSocket: integer(env, "MAX_SUBSCRIPTIONS_PER_SOCKET", 50, 1, 100_000),
    maxSocketsPerKey: integer(env, "MAX_SOCKETS_PER_KEY", 20, 1, 1_000_000),
    usageFlushMs: usageFlushMs(env),
    grpc: grpcSettings(env, port),
    ruleLimits: {
      maxRulesPerTenant: integer(env, "MAX_RULES_PER_TENANT", DEFAULT_RULE_LIMITS.maxRulesPerTenant, 1, 1_000_000),
      maxImportRules: integer(env, "MAX_IMPORT_RULES", DEFAULT_RULE_LIMITS.maxImportRules, 1, 1_000_000),
      maxImportBytes: integer(env, "MAX_IMPORT_BYTES", DEFAULT_RULE_LIMITS.maxImportBytes, 1024, 64 << 20),
    },
    deprecations,
  };
}

function metricsListener(env: NodeJS.ProcessEnv, apiPort: number): { port: number; host: string } | null {
  const port = env.METRICS_PORT ? integer(env, "METRICS_PORT", 0, 0, 65535) : null;
  if (port === null) {
    if (env.METRICS_HOST) throw new SettingsError("METRICS_HOST is set but METRICS_PORT is not");
    return null;
  }
  if (port !== 0 && port === apiPort) throw new SettingsError(`METRICS_PORT must differ from PORT (both ${port}): metrics without a token are served on a listener of their own`);
  // Loopback unless told otherwise: an unauthenticated listener is opened to a network only on purpose.
  return { port, host: env.METRICS_HOST || "127.0.0.1" };
}

function grpcSettings(env: NodeJS.ProcessEnv, apiPort: number): GrpcSettings | null {
  const port = env.GRPC_PORT ? integer(env, "GRPC_PORT", 0, 0, 65535) : null;
  const dependent = ["GRPC_HOST", "GRPC_TLS_CERT_FILE", "GRPC_TLS_KEY_FILE", "GRPC_DOMAINS"].filter((name) => env[name]);
  if (port === null) {
    if (dependent.length > 0) throw new SettingsError(`${dependent[0]} is set but GRPC_PORT is not`);
    return null;
  }
  if (port !== 0 && port === apiPort) throw new SettingsError(`GRPC_PORT must differ from PORT (both ${port})`);
  if (Boolean(env.GRPC_TLS_CERT_FILE) !== Boolean(env.GRPC_TLS_KEY_FILE)) throw new SettingsError("GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together: set both or neither");
  const cert = pemFile(env, "GRPC_TLS_CERT_FILE");
  const key = pemFile(env, "GRPC_TLS_KEY_FILE");
  return { port, host: env.GRPC_HOST || env.HOST || "0.0.0.0", tls: cert !== null && key !== null ? { cert, key } : null, domainTenants: domainTenants(env) };
}

/** GRPC_DOMAINS: "<envoy domain>=<tenant>" pairs, comma separated. */
function domainTenants(env: NodeJS.ProcessEnv): Map<string, string> {
  const tenants = new Map<string, string>();
  for (const entry of (env.GRPC_DOMAINS ?? "").split(",").filter((e) => e.trim() !== "")) {
    const at = entry.indexOf("=");
    const domain = entry.slice(0, at).trim();
    const tenant = entry.slice(at + 1).trim();
    if (at < 0 || domain === "" || tenant === "") throw new SettingsError(`GRPC_DOMAINS must list <domain>=<tenant> pairs, comma separated (got ${JSON.stringify(entry)})`);
    if (tenants.has(domain)) throw new SettingsError(`GRPC_DOMAINS names domain ${JSON.stringify(domain)} twice`);
    tenants.set(domain, tenant);
  }
  return tenants;
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

const REGION_NAME = /^[A-Za-z0-9_-]{1,32}$/;

function regionSettings(env: NodeJS.ProcessEnv): RegionSettings | null {
  const name = env.REGION || null;
  const given = ["REGION_PEERS", "REGION_SYNC_MS", "REGION_PARTITION_AFTER_MS", "REGION_PARTITION_MODE"].filter((n) => env[n]);
  if (name === null) {
    if (given.length > 0) throw new SettingsError(`${given.join(", ")} set without REGION: name this instance's region`);
    return null;
  }
  if (!REGION_NAME.test(name)) throw new SettingsError(`REGION must be 1 to 32 letters, digits, "-" or "_" (got ${JSON.stringify(name)})`);
  if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES && !env.REDIS_SENTINELS) throw new SettingsError("REGION needs the region's own Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)");
  const peers = (env.REGION_PEERS ?? "").split(",").filter((entry) => entry.trim() !== "").map((entry) => {
    const at = entry.indexOf("=");
    const peer = entry.slice(0, at).trim();
    const address = entry.slice(at + 1).trim();
    if (at < 0 || !REGION_NAME.test(peer)) throw new SettingsError(`REGION_PEERS must list <region>=<redis url> entries, comma separated (got ${JSON.stringify(entry)})`);
    if (peer === name) throw new SettingsError(`REGION_PEERS names this instance's own region ${JSON.stringify(name)}`);
    return { name: peer, url: url({ [`REGION_PEERS ${peer}`]: address }, `REGION_PEERS ${peer}`, ["redis:", "rediss:"])! };
  });
  if (peers.length === 0) throw new SettingsError("REGION_PEERS must name at least one other region (<region>=<redis url>, comma separated)");
  const names = peers.map((p) => p.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new SettingsError(`REGION_PEERS names region ${JSON.stringify(twice)} twice`);
  const syncMs = integer(env, "REGION_SYNC_MS", 200, 10, 60_000);
  const mode = env.REGION_PARTITION_MODE || PARTITION_MODES[0];
  if (!(PARTITION_MODES as readonly string[]).includes(mode)) throw new SettingsError(`REGION_PARTITION_MODE must be ${PARTITION_MODES.join(" or ")} (got ${JSON.stringify(mode)})`);
  const partitionMode = mode as PartitionMode;
  return { name, peers, syncMs, partitionAfterMs: integer(env, "REGION_PARTITION_AFTER_MS", Math.max(1000, 5 * syncMs), 2 * syncMs, 600_000), partitionMode };
}

function redisSecurity(env: NodeJS.ProcessEnv): RedisSecurity {
  const topology = ["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"].find((name) => env[name]);
  const given = (names: string[]) => names.filter((name) => env[name]);
  const needsTopology = given(["REDIS_USERNAME", "REDIS_PASSWORD", "REDIS_TLS", "REDIS_TLS_CA_FILE", "REDIS_TLS_CERT_FILE", "REDIS_TLS_KEY_FILE", "REDIS_TLS_SERVERNAME"]);
  if (topology === undefined && needsTopology.length > 0) {
    throw new SettingsError(`${needsTopology[0]} is set but none of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS is`);
  }
  const sentinelCredentials = given(["REDIS_SENTINEL_USERNAME", "REDIS_SENTINEL_PASSWORD"]);
  if (sentinelCredentials.length > 0 && topology !== "REDIS_SENTINELS") throw new SettingsError(`${sentinelCredentials[0]} is set but REDIS_SENTINELS is not`);
  if (env.REDIS_USERNAME && !env.REDIS_PASSWORD) throw new SettingsError("REDIS_USERNAME needs REDIS_PASSWORD (Redis authenticates a user by its password)");
  if (env.REDIS_SENTINEL_USERNAME && !env.REDIS_SENTINEL_PASSWORD) throw new SettingsError("REDIS_SENTINEL_USERNAME needs REDIS_SENTINEL_PASSWORD");

  let tlsOn: boolean;
  if (topology === "REDIS_URL") {
    const where = new URL(env.REDIS_URL!);
    if ((where.username || where.password) && (env.REDIS_USERNAME || env.REDIS_PASSWORD)) {
      throw new SettingsError("REDIS_URL carries a user or password and REDIS_USERNAME or REDIS_PASSWORD is set too: give the credentials one way");
    }
    if (env.REDIS_TLS) throw new SettingsError("REDIS_TLS applies to REDIS_CLUSTER_NODES and REDIS_SENTINELS: with REDIS_URL, write rediss:// for TLS");
    tlsOn = where.protocol === "rediss:";
  } else {
    tlsOn = boolean(env, "REDIS_TLS", false);
  }
  const tlsSettings = given(["REDIS_TLS_CA_FILE", "REDIS_TLS_CERT_FILE", "REDIS_TLS_KEY_FILE", "REDIS_TLS_SERVERNAME"]);
  if (!tlsOn && tlsSettings.length > 0) throw new SettingsError(`${tlsSettings[0]} is set but TLS is off: write rediss:// in REDIS_URL, or set REDIS_TLS=1`);
  if (Boolean(env.REDIS_TLS_CERT_FILE) !== Boolean(env.REDIS_TLS_KEY_FILE)) throw new SettingsError("REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together: set both or neither");
  const tls: RedisTls = {};
  const ca = pemFile(env, "REDIS_TLS_CA_FILE");
  const cert = pemFile(env, "REDIS_TLS_CERT_FILE");
  const key = pemFile(env, "REDIS_TLS_KEY_FILE");
  if (ca !== null) tls.ca = ca;
  if (cert !== null) tls.cert = cert;
  if (key !== null) tls.key = key;
  if (env.REDIS_TLS_SERVERNAME) tls.servername = env.REDIS_TLS_SERVERNAME;
  return {
    username: env.REDIS_USERNAME || null,
    password: env.REDIS_PASSWORD || null,
    tls: tlsOn ? tls : null,
    sentinelUsername: env.REDIS_SENTINEL_USERNAME || null,
    sentinelPassword: env.REDIS_SENTINEL_PASSWORD || null,
  };
}

/** The text of a PEM file a setting names, read now so that a wrong path stops the start rather than the first connection. */
function pemFile(env: NodeJS.ProcessEnv, name: string): string | null {
  const path = env[name];
  if (!path) return null;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new SettingsError(`${name} cannot be read: ${(error as Error).message}`);
  }
  if (!text.includes("-----BEGIN ")) throw new SettingsError(`${name} is not a PEM file (${path} has no "-----BEGIN" line)`);
  return text;
}

/** sslmode values node-postgres knows; anything else it would silently treat as verify-full. */
const SSL_MODES = ["disable", "prefer", "require", "verify-ca", "verify-full", "no-verify"];

/**
 * DATABASE_URL, whose TLS parameters node-postgres reads itself (sslmode,
 * sslrootcert, sslcert, sslkey): checked here, so that a mistyped mode or an
 * unreadable certificate stops the start instead of failing every connection.
 */
function databaseUrl(env: NodeJS.ProcessEnv): string | null {
  const raw = url(env, "DATABASE_URL", ["postgres:", "postgresql:"]);
  if (raw === null) return null;
  const params = new URL(raw).searchParams;
  const sslmode = params.get("sslmode");
  if (sslmode !== null && !SSL_MODES.includes(sslmode)) {
    throw new SettingsError(`DATABASE_URL sslmode must be one of ${SSL_MODES.join(", ")} (got ${JSON.stringify(sslmode)})`);
  }
  for (const file of ["sslrootcert", "sslcert", "sslkey"]) {
    const path = params.get(file);
    if (path === null) continue;
    try {
      readFileSync(path);
    } catch (error) {
      throw new SettingsError(`DATABASE_URL ${file} cannot be read: ${(error as Error).message}`);
    }
  }
  return raw;
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

/** 0 turns usage counting off; anything else is an interval, not so short that a fleet's flushes would load Redis. */
function usageFlushMs(env: NodeJS.ProcessEnv): number {
  const raw = env.USAGE_FLUSH_MS;
  if (raw === undefined || raw === "") return 5000;
  const value = Number(raw);
  if (value === 0) return 0;
  if (!Number.isInteger(value) || value < 100 || value > 60_000) {
    throw new SettingsError(`USAGE_FLUSH_MS must be 0 (usage not counted) or an integer from 100 to 60000 (got ${JSON.stringify(raw)})`);
  }
  return value;
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

/** A setting's name before it was renamed so that the names agree (RULE_ for the rules' settings, _MS for durations), and how many of the new unit its unit is. */
interface FormerName {
  name: string;
  unit: number;
}

/**
 * An integer setting that had another name before. The former name still
 * works, in its own unit and bounds (and its errors name it), and adds a
 * warning that says what to set instead; both names at once is an error.
 */
function renamedInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number, formerly: FormerName, deprecations: string[]): number {
  const old = env[formerly.name];
  if (old === undefined || old === "") return integer(env, name, fallback, min, max);
  if (env[name]) throw new SettingsError(`${formerly.name} is the former name of ${name}: set ${name} alone`);
  const value = integer(env, formerly.name, fallback / formerly.unit, Math.ceil(min / formerly.unit), Math.floor(max / formerly.unit)) * formerly.unit;
  deprecations.push(`${formerly.name} is deprecated: set ${name}=${value} instead`);
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
