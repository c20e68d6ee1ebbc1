/**
 * The refusal counters a rule's autoBan counts with: one period per id from
 * its first refusal, counts that no two concurrent callers both see (so one
 * of them, and only one, meets a threshold), in memory on a pinned clock and
 * in Redis with its exact key and expiry.
 */

import { afterAll, describe, expect, it } from "vitest";
import { MemoryRefusalCounter } from "../../src/store/memory/memory-refusal-counter.js";
import { RedisRefusalCounter } from "../../src/store/redis/redis-refusal-counter.js";
import { ManualClock } from "../support/clock.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

describe("MemoryRefusalCounter", () => {
  it("counts per id within a period from the first refusal, and starts again once it ends", async () => {
    const clock = new ManualClock();
    const counter = new MemoryRefusalCounter(clock);
    expect([await counter.count("a", 1000), await counter.count("a", 1000), await counter.count("b", 1000)]).toEqual([1, 2, 1]);
    clock.advance(999);
    expect(await counter.count("a", 1000)).toBe(3);
    clock.advance(1);
    expect(await counter.count("a", 1000)).toBe(1);
  });
});

describe.runIf(await redisAvailable())("RedisRefusalCounter", () => {
  const { redis, prefix, cleanup } = testRedis();
  afterAll(cleanup);

  it("keeps one counter per id under <prefix>refusals:, expiring with its period, the first refusal's", async () => {
    const counter = new RedisRefusalCounter(redis, prefix);
    expect(await counter.count("r1\nuser:u1", 60_000)).toBe(1);
    expect(await counter.count("r1\nuser:u1", 1)).toBe(2);
    const key = `${prefix}refusals:r1\nuser:u1`;
    expect(await redis.get(key)).toBe("2");
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it("gives each of many concurrent counters, of two clients, a count of its own", async () => {
    const other = testRedis().redis;
    try {
      const counters = [new RedisRefusalCounter(redis, prefix), new RedisRefusalCounter(other, prefix)];
      const counts = await Promise.all(Array.from({ length: 40 }, (_, i) => counters[i % 2]!.count("r2\nuser:u1", 60_000)));
      expect(counts.sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    } finally {
      other.disconnect();
    }
  });
});
