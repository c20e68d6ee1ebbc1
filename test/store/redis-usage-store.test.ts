import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MINUTE_MS, USAGE_RETENTION_MS } from "../../src/domain/usage.js";
import { RedisUsageStore } from "../../src/store/redis/redis-usage-store.js";
import { testRedis } from "../support/redis.js";
import { startRedisCluster, type LocalRedisCluster } from "../harness/local-redis.js";
import { redisAvailable, redisBinariesAvailable } from "../support/services.js";
import { usageStoreConformance } from "./usage-store.conformance.js";

describe.runIf(await redisAvailable())("redis", () => {
  usageStoreConformance("redis", async () => {
    const { redis, prefix, cleanup } = testRedis();
    return { store: new RedisUsageStore(redis, prefix), cleanup };
  });

  it("writes one hash per rule and minute and sorted sets per tenant and minute, under the prefix with hash tags, expiring after the retention", async () => {
    const { redis, prefix, cleanup } = testRedis();
    try {
      const minute = Date.now() - (Date.now() % MINUTE_MS);
      await new RedisUsageStore(redis, prefix).add({
        instanceId: "i1",
        atMs: minute + 1_000,
        rules: [{ ruleId: "r1", tenantId: "acme", minuteMs: minute, counts: { allowed: 2, refused: 1, shadowRefused: 0 } }],
        buckets: [{ tenantId: "acme", ruleId: "r1", key: "user:a", minuteMs: minute, refusals: 1 }],
      });
      const keys = (await redis.keys(`${prefix}*`)).sort();
      expect(keys).toEqual([`${prefix}usage:instances`, `${prefix}usage:{all}:${minute}`, `${prefix}usage:{r:r1}:${minute}`, `${prefix}usage:{t:acme}:${minute}`].sort());
      expect(await redis.hgetall(`${prefix}usage:{r:r1}:${minute}`)).toEqual({ "a:acme": "2", "r:acme": "1" });
      expect(await redis.zrange(`${prefix}usage:{t:acme}:${minute}`, 0, -1, "WITHSCORES")).toEqual(['["r1","user:a"]', "1"]);
      expect(await redis.zrange(`${prefix}usage:{all}:${minute}`, 0, -1, "WITHSCORES")).toEqual(['["acme","r1","user:a"]', "1"]);
      expect(await redis.pexpiretime(`${prefix}usage:{r:r1}:${minute}`)).toBe(minute + MINUTE_MS + USAGE_RETENTION_MS);
      expect(await redis.pexpiretime(`${prefix}usage:{t:acme}:${minute}`)).toBe(minute + MINUTE_MS + USAGE_RETENTION_MS);
    } finally {
      await cleanup();
    }
  });
});

/** A batch touches keys of many slots, and ioredis pipelines a Cluster's commands per node: the same suite on a cluster of this suite's own. */
describe.runIf(await redisBinariesAvailable())("redis cluster", () => {
  let cluster: LocalRedisCluster;
  let suite = 0;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(() => cluster?.stop());

  usageStoreConformance("redis cluster", async () => {
    const client = new Cluster(cluster.nodes, { enableAutoPipelining: true });
    return { store: new RedisUsageStore(client, `fgtest:${++suite}:`), cleanup: async () => void client.disconnect() };
  });
});
