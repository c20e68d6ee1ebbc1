/**
 * Redis bytes per live bucket: `npm run memory` (1,000,000 buckets per
 * algorithm) or `npm run memory -- --buckets 100000`. It starts a private
 * redis-server on a spare port (so nothing else shares its memory), creates
 * the buckets through the real decide.lua, one request each, and reads
 * INFO memory before and after. Two naive layouts are measured the same way
 * for comparison: one string key with a TTL per bucket, and the two string
 * keys (current and previous window) a sliding window counter usually takes.
 */

import { Redis } from "ioredis";
import type { LimitParams } from "../src/domain/algorithms/index.js";
import { ALGORITHMS } from "../src/domain/rule.js";
import { KeyLayout } from "../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../src/store/redis/redis-counter-store.js";
import { startOwnRedis } from "../test/harness/redis-server.js";

const bucketsArg = process.argv.indexOf("--buckets");
const BUCKETS = bucketsArg > 0 ? Number(process.argv[bucketsArg + 1]) : 1_000_000;
const BATCH = 2_000;

async function main(): Promise<void> {
  const server = await startOwnRedis();
  const redis = new Redis(server.url);
  try {
    console.log(`memory: ${BUCKETS.toLocaleString("en")} live buckets per layout, private redis-server on port ${server.port}`);
    const rows: [string, number, string][] = [];
    // A CONCURRENCY bucket is measured holding one lease (its check's); the lease is ignored by the other algorithms.
    for (const algorithm of ALGORITHMS) {
      const params: LimitParams = { algorithm, limit: 100, windowMs: 60_000, capacity: 100, action: "REJECT" };
      const store = new RedisCounterStore(redis, { layout: new KeyLayout("fg:", 16_384) });
      rows.push([algorithm, ...(await measure(redis, (i) => store.decide([{ buckets: [{ ruleId: "r1", key: `user:u${i}`, params }], cost: 1, dryRun: false, lease: `lease-${i}` }])))]);
    }
    rows.push(["one string key + TTL per bucket", ...(await measure(redis, (i) => redis.set(`fg:{r1}:user:u${i}`, "1796018770:1", "PX", 120_000)))]);
    rows.push([
      "two string keys + TTL per bucket",
      ...(await measure(redis, (i) => {
        void redis.set(`fg:{r1:user:u${i}}:1796018770`, "1", "PX", 120_000);
        return redis.set(`fg:{r1:user:u${i}}:1796018771`, "1", "PX", 120_000);
      })),
    ]);
    console.log("layout                            bytes per bucket   keys");
    for (const [name, bytes, keys] of rows) console.log(`${name.padEnd(34)}${bytes.toFixed(1).padStart(16)}   ${keys}`);
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

/** Runs `create` for every bucket index in pipelined batches and returns bytes per bucket and the key count. */
async function measure(redis: Redis, create: (i: number) => Promise<unknown>): Promise<[number, string]> {
  await redis.flushall();
  const before = await usedMemory(redis);
  for (let start = 0; start < BUCKETS; start += BATCH) {
    const batch: Promise<unknown>[] = [];
    for (let i = start; i < Math.min(BUCKETS, start + BATCH); i++) batch.push(create(i));
    await Promise.all(batch);
  }
  const after = await usedMemory(redis);
  return [(after - before) / BUCKETS, String(await redis.dbsize())];
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

await main();
