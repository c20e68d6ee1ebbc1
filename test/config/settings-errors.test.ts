/**
 * Every setting's error: for each variable settings.ts reads, a bad value
 * stops the start with the exact message naming it. A variable settings.ts
 * reads that is in neither table fails the first test, so a new setting
 * comes with its error here.
 */

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../../src/config/settings.js";

/** What settings.ts reads: `env.NAME`, and names in quotes. */
const READ = [...readFileSync(new URL("../../src/config/settings.ts", import.meta.url), "utf8").matchAll(/env\.([A-Z][A-Z0-9_]+)|"([A-Z][A-Z0-9_]{2,})"/g)].map(
  (match) => match[1] ?? match[2]!,
);

/** Settings any value suits here: each is either free text, or checked where it is used (named). */
const ANY_VALUE = {
  HOST: "an address to listen on; the listener refuses one it cannot bind",
  LOG_LEVEL: "the logger's level; pino refuses an unknown one at start",
  NODE_ENV: '"production" or anything else',
  DATA_DIR: '"memory://" or a directory, made at start (mkdir reports one it cannot make)',
  REDIS_KEY_PREFIX: "any text, empty included",
  RULES_FILE: "a path; the start reports a file it cannot read or import (app.ts)",
};

const REDIS = { REDIS_URL: "redis://cache:6379" };
const REDIS_TLS_URL = { REDIS_URL: "rediss://cache:6379" };
const MISSING_FILE = "/nonexistent/floodgate/ca.pem";

/** [the variable the message names, the environment, the exact message] */
const ERRORS: [string, Record<string, string>, string][] = [
  ["PORT", { PORT: "65536" }, 'PORT must be an integer from 0 to 65535 (got "65536")'],
  ["METRICS_PORT", { METRICS_PORT: "-1" }, 'METRICS_PORT must be an integer from 0 to 65535 (got "-1")'],
  ["METRICS_PORT", { PORT: "9464", METRICS_PORT: "9464" }, "METRICS_PORT must differ from PORT (both 9464): metrics without a token are served on a listener of their own"],
  ["METRICS_HOST", { METRICS_HOST: "::" }, "METRICS_HOST is set but METRICS_PORT is not"],
  ["GRPC_PORT", { GRPC_PORT: "70000" }, 'GRPC_PORT must be an integer from 0 to 65535 (got "70000")'],
  ["GRPC_PORT", { PORT: "8081", GRPC_PORT: "8081" }, "GRPC_PORT must differ from PORT (both 8081)"],
  ["GRPC_HOST", { GRPC_HOST: "::" }, "GRPC_HOST is set but GRPC_PORT is not"],
  ["GRPC_TLS_CERT_FILE", { GRPC_PORT: "8081", GRPC_TLS_CERT_FILE: MISSING_FILE, GRPC_TLS_KEY_FILE: MISSING_FILE }, `GRPC_TLS_CERT_FILE cannot be read: ENOENT: no such file or directory, open '${MISSING_FILE}'`],
  ["GRPC_TLS_KEY_FILE", { GRPC_PORT: "8081", GRPC_TLS_KEY_FILE: MISSING_FILE }, "GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together: set both or neither"],
  ["GRPC_DOMAINS", { GRPC_PORT: "8081", GRPC_DOMAINS: "edge" }, 'GRPC_DOMAINS must list <domain>=<tenant> pairs, comma separated (got "edge")'],
  ["GRPC_DOMAINS", { GRPC_PORT: "8081", GRPC_DOMAINS: "edge=acme,edge=beta" }, 'GRPC_DOMAINS names domain "edge" twice'],
  ["METRICS_TOKEN", { METRICS_TOKEN: "has spaces in it, sixteen+" }, "METRICS_TOKEN must be at least 16 characters, without spaces"],
  ["ADMIN_TOKEN", { ADMIN_TOKEN: "short" }, "ADMIN_TOKEN must be at least 16 characters, without spaces"],
  ["DATABASE_URL", { DATABASE_URL: "not a url" }, "DATABASE_URL is not a URL"],
  ["DATABASE_URL", { DATABASE_URL: "mysql://db/rules" }, "DATABASE_URL must start with postgres:// or postgresql:// (got mysql://)"],
  [
    "DATABASE_URL",
    { DATABASE_URL: "postgres://db/rules?sslmode=strict" },
    'DATABASE_URL sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify (got "strict")',
  ],
  [
    "DATABASE_URL",
    { DATABASE_URL: `postgres://db/rules?sslrootcert=${MISSING_FILE}` },
    `DATABASE_URL sslrootcert cannot be read: ENOENT: no such file or directory, open '${MISSING_FILE}'`,
  ],
  ["REDIS_URL", { REDIS_URL: "http://cache:6379" }, "REDIS_URL must start with redis:// or rediss:// (got http://)"],
  ["REDIS_CLUSTER_NODES", { REDIS_CLUSTER_NODES: "redis-a" }, 'REDIS_CLUSTER_NODES must be comma-separated host:port pairs (got "redis-a")'],
  ["REDIS_SENTINELS", { REDIS_SENTINELS: "s1", REDIS_SENTINEL_MASTER: "m" }, 'REDIS_SENTINELS must be comma-separated host:port pairs (got "s1")'],
  ["REDIS_SENTINEL_MASTER", { REDIS_SENTINEL_MASTER: "m" }, "REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not"],
  ["REDIS_USERNAME", { REDIS_USERNAME: "floodgate" }, "REDIS_USERNAME is set but none of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS is"],
  ["REDIS_PASSWORD", { REDIS_PASSWORD: "secret" }, "REDIS_PASSWORD is set but none of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS is"],
  ["REDIS_TLS", { REDIS_CLUSTER_NODES: "redis-a:7000", REDIS_TLS: "maybe" }, 'REDIS_TLS must be true or false (got "maybe")'],
  ["REDIS_TLS_CA_FILE", { ...REDIS_TLS_URL, REDIS_TLS_CA_FILE: MISSING_FILE }, `REDIS_TLS_CA_FILE cannot be read: ENOENT: no such file or directory, open '${MISSING_FILE}'`],
  ["REDIS_TLS_CERT_FILE", { ...REDIS_TLS_URL, REDIS_TLS_CERT_FILE: MISSING_FILE }, "REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together: set both or neither"],
  ["REDIS_TLS_KEY_FILE", { ...REDIS_TLS_URL, REDIS_TLS_KEY_FILE: MISSING_FILE }, "REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together: set both or neither"],
  ["REDIS_TLS_SERVERNAME", { ...REDIS, REDIS_TLS_SERVERNAME: "cache" }, "REDIS_TLS_SERVERNAME is set but TLS is off: write rediss:// in REDIS_URL, or set REDIS_TLS=1"],
  ["REDIS_SENTINEL_USERNAME", { ...REDIS, REDIS_SENTINEL_USERNAME: "watcher" }, "REDIS_SENTINEL_USERNAME is set but REDIS_SENTINELS is not"],
  ["REDIS_SENTINEL_PASSWORD", { ...REDIS, REDIS_SENTINEL_PASSWORD: "secret" }, "REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINELS is not"],
  ["REDIS_PAGES", { REDIS_PAGES: "0" }, 'REDIS_PAGES must be an integer from 1 to 1048576 (got "0")'],
  ["REDIS_TIMEOUT_MS", { REDIS_TIMEOUT_MS: "0" }, 'REDIS_TIMEOUT_MS must be an integer from 1 to 60000 (got "0")'],
  ["REDIS_BREAKER_FAILURES", { REDIS_BREAKER_FAILURES: "1001" }, 'REDIS_BREAKER_FAILURES must be an integer from 1 to 1000 (got "1001")'],
  ["REDIS_BREAKER_OPEN_MS", { REDIS_BREAKER_OPEN_MS: "9" }, 'REDIS_BREAKER_OPEN_MS must be an integer from 10 to 600000 (got "9")'],
  ["INSTANCE_COUNT", { INSTANCE_COUNT: "0" }, 'INSTANCE_COUNT must be an integer from 1 to 100000 (got "0")'],
  ["RULE_RETRY_MS", { RULE_RETRY_MS: "9" }, 'RULE_RETRY_MS must be an integer from 10 to 600000 (got "9")'],
  ["RULE_RELOAD_MS", { RULE_RELOAD_MS: "999" }, 'RULE_RELOAD_MS must be an integer from 1000 to 86400000 (got "999")'],
  ["API_KEY_CACHE_MS", { API_KEY_CACHE_MS: "-1" }, 'API_KEY_CACHE_MS must be an integer from 0 to 600000 (got "-1")'],
  ["ADMIN_MUTATIONS_PER_MINUTE", { ADMIN_MUTATIONS_PER_MINUTE: "0" }, 'ADMIN_MUTATIONS_PER_MINUTE must be an integer from 1 to 1000000 (got "0")'],
  ["EVENT_INTERVAL_MS", { EVENT_INTERVAL_MS: "9" }, 'EVENT_INTERVAL_MS must be an integer from 10 to 60000 (got "9")'],
  ["USAGE_FLUSH_MS", { USAGE_FLUSH_MS: "99" }, 'USAGE_FLUSH_MS must be 0 (usage not counted) or an integer from 100 to 60000 (got "99")'],
  ["EVENT_MAX_KEYS", { EVENT_MAX_KEYS: "0" }, 'EVENT_MAX_KEYS must be an integer from 1 to 1000000 (got "0")'],
  ["INTROSPECTION", { INTROSPECTION: "sometimes" }, 'INTROSPECTION must be true or false (got "sometimes")'],
  ["GRAPHIQL", { GRAPHIQL: "sometimes" }, 'GRAPHIQL must be true or false (got "sometimes")'],
  ["MAX_BODY_BYTES", { MAX_BODY_BYTES: "1023" }, 'MAX_BODY_BYTES must be an integer from 1024 to 67108864 (got "1023")'],
  ["MAX_QUERY_DEPTH", { MAX_QUERY_DEPTH: "1" }, 'MAX_QUERY_DEPTH must be an integer from 2 to 100 (got "1")'],
  ["MAX_QUERY_FIELDS", { MAX_QUERY_FIELDS: "9" }, 'MAX_QUERY_FIELDS must be an integer from 10 to 1000000 (got "9")'],
  ["SHUTDOWN_TIMEOUT_MS", { SHUTDOWN_TIMEOUT_MS: "600001" }, 'SHUTDOWN_TIMEOUT_MS must be an integer from 0 to 600000 (got "600001")'],
  ["OVER_LIMIT_CACHE_SIZE", { OVER_LIMIT_CACHE_SIZE: "-1" }, 'OVER_LIMIT_CACHE_SIZE must be an integer from 0 to 10000000 (got "-1")'],
  ["LEASE_HOT_CHECKS_PER_SECOND", { LEASE_HOT_CHECKS_PER_SECOND: "many" }, 'LEASE_HOT_CHECKS_PER_SECOND must be an integer from 0 to 10000000 (got "many")'],
  ["LEASE_MS", { LEASE_MS: "0" }, 'LEASE_MS must be an integer from 1 to 1000 (got "0")'],
  ["LEASE_MAX_MS", { LEASE_MAX_MS: "60001" }, 'LEASE_MAX_MS must be an integer from 1 to 60000 (got "60001")'],
  ["REGION", { ...REDIS, REGION: "eu west", REGION_PEERS: "us=redis://us:6379" }, 'REGION must be 1 to 32 letters, digits, "-" or "_" (got "eu west")'],
  ["REGION", { REGION: "eu", REGION_PEERS: "us=redis://us:6379" }, "REGION needs the region's own Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)"],
  ["REGION", { ...REDIS, REGION_PEERS: "us=redis://us:6379" }, "REGION_PEERS set without REGION: name this instance's region"],
  ["REGION_PEERS", { ...REDIS, REGION: "eu" }, "REGION_PEERS must name at least one other region (<region>=<redis url>, comma separated)"],
  ["REGION_PEERS", { ...REDIS, REGION: "eu", REGION_PEERS: "redis://us:6379" }, 'REGION_PEERS must list <region>=<redis url> entries, comma separated (got "redis://us:6379")'],
  ["REGION_PEERS", { ...REDIS, REGION: "eu", REGION_PEERS: "eu=redis://eu2:6379" }, 'REGION_PEERS names this instance\'s own region "eu"'],
  ["REGION_PEERS", { ...REDIS, REGION: "eu", REGION_PEERS: "us=redis://a:6379,us=redis://b:6379" }, 'REGION_PEERS names region "us" twice'],
  ["REGION_PEERS", { ...REDIS, REGION: "eu", REGION_PEERS: "us=http://us:6379" }, "REGION_PEERS us must start with redis:// or rediss:// (got http://)"],
  ["REGION_SYNC_MS", { ...REDIS, REGION: "eu", REGION_PEERS: "us=redis://us:6379", REGION_SYNC_MS: "5" }, 'REGION_SYNC_MS must be an integer from 10 to 60000 (got "5")'],
  ["REGION_PARTITION_AFTER_MS", { ...REDIS, REGION: "eu", REGION_PEERS: "us=redis://us:6379", REGION_SYNC_MS: "500", REGION_PARTITION_AFTER_MS: "900" }, 'REGION_PARTITION_AFTER_MS must be an integer from 1000 to 600000 (got "900")'],
  ["REGION_PARTITION_MODE", { ...REDIS, REGION: "eu", REGION_PEERS: "us=redis://us:6379", REGION_PARTITION_MODE: "GUESS" }, 'REGION_PARTITION_MODE must be SHARE or FAILURE_MODE (got "GUESS")'],
  ["FAST_PATH_CACHE_SIZE", { FAST_PATH_CACHE_SIZE: "1000001" }, 'FAST_PATH_CACHE_SIZE must be an integer from 0 to 1000000 (got "1000001")'],
  ["FAST_PATH_CACHE_BYTES", { FAST_PATH_CACHE_BYTES: "lots" }, 'FAST_PATH_CACHE_BYTES must be an integer from 1048576 to 1099511627776 (got "lots")'],
  ["MAX_SUBSCRIPTIONS_PER_SOCKET", { MAX_SUBSCRIPTIONS_PER_SOCKET: "100001" }, 'MAX_SUBSCRIPTIONS_PER_SOCKET must be an integer from 1 to 100000 (got "100001")'],
  ["MAX_SOCKETS_PER_KEY", { MAX_SOCKETS_PER_KEY: "0" }, 'MAX_SOCKETS_PER_KEY must be an integer from 1 to 1000000 (got "0")'],
  ["MAX_RULES_PER_TENANT", { MAX_RULES_PER_TENANT: "1000001" }, 'MAX_RULES_PER_TENANT must be an integer from 1 to 1000000 (got "1000001")'],
  ["MAX_IMPORT_RULES", { MAX_IMPORT_RULES: "0" }, 'MAX_IMPORT_RULES must be an integer from 1 to 1000000 (got "0")'],
  ["MAX_IMPORT_BYTES", { MAX_IMPORT_BYTES: "1023" }, 'MAX_IMPORT_BYTES must be an integer from 1024 to 67108864 (got "1023")'],
  // Former names: their own unit and bounds, named in their errors.
  ["RULES_RETRY_MS", { RULES_RETRY_MS: "fast" }, 'RULES_RETRY_MS must be an integer from 10 to 600000 (got "fast")'],
  ["RULE_RELOAD_SECONDS", { RULE_RELOAD_SECONDS: "0" }, 'RULE_RELOAD_SECONDS must be an integer from 1 to 86400 (got "0")'],
  ["RULE_RELOAD_SECONDS", { RULE_RELOAD_SECONDS: "30", RULE_RELOAD_MS: "30000" }, "RULE_RELOAD_SECONDS is the former name of RULE_RELOAD_MS: set RULE_RELOAD_MS alone"],
  ["RULES_RETRY_MS", { RULES_RETRY_MS: "2000", RULE_RETRY_MS: "2000" }, "RULES_RETRY_MS is the former name of RULE_RETRY_MS: set RULE_RETRY_MS alone"],
];

describe("every setting's error", () => {
  it("covers every variable settings.ts reads: each has an error below, or takes any value", () => {
    const covered = new Set([...ERRORS.map(([name]) => name), ...Object.keys(ANY_VALUE)]);
    expect(READ.length).toBeGreaterThan(40);
    expect([...new Set(READ)].filter((name) => !covered.has(name))).toEqual([]);
  });

  it.each(ERRORS)("%s: %o stops the start", (name, env, message) => {
    expect(message).toContain(name);
    expect(() => loadSettings(env)).toThrow(new SettingsError(message));
  });
});

describe("renamed settings", () => {
  it("read the new names with no warning", () => {
    expect(loadSettings({ RULE_RELOAD_MS: "5000", RULE_RETRY_MS: "300" })).toMatchObject({ ruleReloadIntervalMs: 5000, ruleRetryMs: 300, deprecations: [] });
    expect(loadSettings({})).toMatchObject({ ruleReloadIntervalMs: 30_000, ruleRetryMs: 2000, deprecations: [] });
  });

  it.each([
    ["RULE_RELOAD_SECONDS", "5", { ruleReloadIntervalMs: 5000 }, "RULE_RELOAD_SECONDS is deprecated: set RULE_RELOAD_MS=5000 instead"],
    ["RULES_RETRY_MS", "300", { ruleRetryMs: 300 }, "RULES_RETRY_MS is deprecated: set RULE_RETRY_MS=300 instead"],
  ])("still take the former name %s, in its own unit, with one warning naming the new name", (name, value, read, warning) => {
    const settings = loadSettings({ [name]: value });
    expect(settings).toMatchObject(read);
    expect(settings.deprecations).toEqual([warning]);
  });
});
