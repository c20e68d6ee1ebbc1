/** Where the counters live: REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS, each bad value stopped with its exact message. */

import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../../src/config/settings.js";

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
