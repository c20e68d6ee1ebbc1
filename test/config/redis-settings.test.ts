/**
 * Where the counters live: REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS,
 * and how to reach them (credentials, TLS); and DATABASE_URL's TLS
 * parameters. Each bad value stopped with its exact message.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadSettings, NO_REDIS_SECURITY, SettingsError } from "../../src/config/settings.js";

const redisOf = (env: Record<string, string>) => loadSettings(env).redis;

describe("Redis settings", () => {
  it("keep the counters in memory when no Redis is named", () => {
    expect(redisOf({})).toBeNull();
  });

  it("take one Redis from REDIS_URL", () => {
    expect(redisOf({ REDIS_URL: "redis://cache:6380/2" })).toEqual({ kind: "single", url: "redis://cache:6380/2" });
  });

  it("take a cluster's seed nodes from REDIS_CLUSTER_NODES, IPv6 hosts in brackets", () => {
    expect(redisOf({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-b:7001,[::1]:7002" })).toEqual({
      kind: "cluster",
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "redis-b", port: 7001 },
        { host: "::1", port: 7002 },
      ],
    });
  });

  it("take sentinels from REDIS_SENTINELS and the master's name from REDIS_SENTINEL_MASTER", () => {
    expect(redisOf({ REDIS_SENTINELS: "s1:26379,s2:26379", REDIS_SENTINEL_MASTER: "counters" })).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "s1", port: 26379 },
        { host: "s2", port: 26379 },
      ],
      masterName: "counters",
    });
  });

  const refused: [string, Record<string, string>, string][] = [
    ["a node without a port", { REDIS_CLUSTER_NODES: "10.0.0.1:7000,redis-b" }, 'REDIS_CLUSTER_NODES must be comma-separated host:port pairs (got "redis-b")'],
    ["a port out of range", { REDIS_CLUSTER_NODES: "redis-a:70000" }, 'REDIS_CLUSTER_NODES must be comma-separated host:port pairs (got "redis-a:70000")'],
    ["an empty entry", { REDIS_SENTINELS: "s1:26379,", REDIS_SENTINEL_MASTER: "m" }, 'REDIS_SENTINELS must be comma-separated host:port pairs (got "")'],
    [
      "two topologies at once",
      { REDIS_URL: "redis://cache:6379", REDIS_CLUSTER_NODES: "redis-a:7000" },
      "set only one of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS (got REDIS_URL and REDIS_CLUSTER_NODES)",
    ],
    ["sentinels without a master name", { REDIS_SENTINELS: "s1:26379" }, "REDIS_SENTINEL_MASTER must name the master the sentinels watch (REDIS_SENTINELS is set)"],
    ["a master name without sentinels", { REDIS_SENTINEL_MASTER: "counters" }, "REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not"],
  ];
  for (const [what, env, message] of refused) {
    it(`refuse ${what}`, () => {
      expect(() => loadSettings(env)).toThrow(new SettingsError(message));
    });
  }
});

describe("Redis credentials and TLS settings", () => {
  const dir = mkdtempSync(join(tmpdir(), "floodgate-settings-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pem = join(dir, "ca.pem");
  writeFileSync(pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  const notPem = join(dir, "ca.txt");
  writeFileSync(notPem, "not a certificate");
  const missing = join(dir, "missing.pem");
  const securityOf = (env: Record<string, string>) => loadSettings(env).redisSecurity;

  it("ask for nothing by default", () => {
    expect(securityOf({})).toEqual(NO_REDIS_SECURITY);
    expect(securityOf({ REDIS_URL: "redis://:secret@cache:6379" })).toEqual(NO_REDIS_SECURITY);
  });

  it("turn TLS on with rediss://, with the CA, client certificate and server name given", () => {
    expect(securityOf({ REDIS_URL: "rediss://cache:6380" }).tls).toEqual({});
    expect(
      securityOf({ REDIS_URL: "rediss://cache:6380", REDIS_TLS_CA_FILE: pem, REDIS_TLS_CERT_FILE: pem, REDIS_TLS_KEY_FILE: pem, REDIS_TLS_SERVERNAME: "redis.internal" }).tls,
    ).toEqual({ ca: expect.stringContaining("BEGIN CERTIFICATE"), cert: expect.stringContaining("BEGIN"), key: expect.stringContaining("BEGIN"), servername: "redis.internal" });
  });

  it("take a cluster's user, password and TLS from REDIS_USERNAME, REDIS_PASSWORD and REDIS_TLS", () => {
    expect(securityOf({ REDIS_CLUSTER_NODES: "a:7000", REDIS_USERNAME: "floodgate", REDIS_PASSWORD: "pw", REDIS_TLS: "1", REDIS_TLS_CA_FILE: pem })).toEqual({
      ...NO_REDIS_SECURITY,
      username: "floodgate",
      password: "pw",
      tls: { ca: expect.stringContaining("BEGIN") },
    });
  });

  it("take the sentinels' own credentials apart from the nodes'", () => {
    expect(
      securityOf({ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m", REDIS_PASSWORD: "node-pw", REDIS_SENTINEL_USERNAME: "watcher", REDIS_SENTINEL_PASSWORD: "sentinel-pw" }),
    ).toEqual({ ...NO_REDIS_SECURITY, password: "node-pw", sentinelUsername: "watcher", sentinelPassword: "sentinel-pw" });
  });

  const cluster = { REDIS_CLUSTER_NODES: "a:7000" };
  const refused: [string, Record<string, string>, string][] = [
    ["credentials without a Redis", { REDIS_PASSWORD: "pw" }, "REDIS_PASSWORD is set but none of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS is"],
    ["sentinel credentials without sentinels", { ...cluster, REDIS_SENTINEL_PASSWORD: "pw" }, "REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINELS is not"],
    ["a user without a password", { ...cluster, REDIS_USERNAME: "floodgate" }, "REDIS_USERNAME needs REDIS_PASSWORD (Redis authenticates a user by its password)"],
    [
      "a sentinel user without a password",
      { REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_MASTER: "m", REDIS_SENTINEL_USERNAME: "watcher" },
      "REDIS_SENTINEL_USERNAME needs REDIS_SENTINEL_PASSWORD",
    ],
    [
      "credentials both in REDIS_URL and apart",
      { REDIS_URL: "redis://:pw@cache:6379", REDIS_PASSWORD: "pw" },
      "REDIS_URL carries a user or password and REDIS_USERNAME or REDIS_PASSWORD is set too: give the credentials one way",
    ],
    ["REDIS_TLS with REDIS_URL", { REDIS_URL: "redis://cache:6379", REDIS_TLS: "1" }, "REDIS_TLS applies to REDIS_CLUSTER_NODES and REDIS_SENTINELS: with REDIS_URL, write rediss:// for TLS"],
    ["a CA while TLS is off", { ...cluster, REDIS_TLS_CA_FILE: pem }, "REDIS_TLS_CA_FILE is set but TLS is off: write rediss:// in REDIS_URL, or set REDIS_TLS=1"],
    ["a server name while TLS is off", { REDIS_URL: "redis://cache:6379", REDIS_TLS_SERVERNAME: "x" }, "REDIS_TLS_SERVERNAME is set but TLS is off: write rediss:// in REDIS_URL, or set REDIS_TLS=1"],
    ["a client certificate without its key", { ...cluster, REDIS_TLS: "1", REDIS_TLS_CERT_FILE: pem }, "REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together: set both or neither"],
    ["a REDIS_TLS that is not a boolean", { ...cluster, REDIS_TLS: "sometimes" }, 'REDIS_TLS must be true or false (got "sometimes")'],
    ["a CA file that cannot be read", { ...cluster, REDIS_TLS: "1", REDIS_TLS_CA_FILE: missing }, `REDIS_TLS_CA_FILE cannot be read: ENOENT: no such file or directory, open '${missing}'`],
    ["a CA file that is not PEM", { ...cluster, REDIS_TLS: "1", REDIS_TLS_CA_FILE: notPem }, `REDIS_TLS_CA_FILE is not a PEM file (${notPem} has no "-----BEGIN" line)`],
    [
      "an sslmode node-postgres does not know",
      { DATABASE_URL: "postgresql://db/rules?sslmode=required" },
      'DATABASE_URL sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify (got "required")',
    ],
    [
      "an sslrootcert that cannot be read",
      { DATABASE_URL: `postgresql://db/rules?sslmode=verify-full&sslrootcert=${missing}` },
      `DATABASE_URL sslrootcert cannot be read: ENOENT: no such file or directory, open '${missing}'`,
    ],
  ];
  for (const [what, env, message] of refused) {
    it(`refuse ${what}`, () => {
      expect(() => loadSettings(env)).toThrow(new SettingsError(message));
    });
  }
});
