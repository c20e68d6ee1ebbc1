/**
 * lua/decide.lua and lua/reset.lua on real Redis: the exact keys, fields, TTLs
 * and replies, so a change to the layout is a deliberate one.
 */

import type { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { BucketRef } from "../../src/domain/ports.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { registerScripts, type ScriptedRedis } from "../../src/store/redis/scripts.js";
import { ManualClock } from "../support/clock.js";
import { deleteByPrefix, testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

describe.runIf(await redisAvailable())("decide.lua", () => {
  let redis: Redis;
  let scripted: ScriptedRedis;
  let prefix: string;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  let store: RedisCounterStore;
  // One page per rule, so every bucket's keys are known in advance.
  let layout: KeyLayout;

  beforeAll(() => {
    ({ redis, prefix, cleanup } = testRedis());
    scripted = registerScripts(redis);
    layout = new KeyLayout(prefix, 1);
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await deleteByPrefix(redis, prefix);
    clock = new ManualClock(T0);
    store = new RedisCounterStore(redis, { layout, clock });
  });

  const fixedWindow: BucketRef = {
    ruleId: "r1",
    key: "user:u1",
    params: { algorithm: "FIXED_WINDOW", limit: 2, windowMs: 60_000, capacity: 2, action: "REJECT" },
  };
  const check = (buckets: BucketRef[], cost = 1, dryRun = false) => store.decide([{ buckets, cost, dryRun }]).then((r) => r[0]!);

  it("replies now, allowed, then five integers per rule", async () => {
    const window = Math.floor(T0 / 60_000);
    const reply = await scripted.floodgateDecide(2, `${prefix}{r1:0}:a`, `${prefix}{r1:0}:b`, T0, 1, "0", 1, 3, 2, 60_000, 2, 1, "user:u1");
    expect(reply).toEqual([T0, 1, 1, 1, (window + 1) * 60_000, -1, 0]);
  });

  it("stores a bucket as one field of the rule's page, with the page's open time, horizon and TTL", async () => {
    await check([fixedWindow]);
    const page = `${prefix}{r1:0}:a`;
    expect(await redis.keys(`${prefix}*`)).toEqual([page]);
    expect(await redis.hgetall(page)).toEqual({
      _o: String(T0),
      _u: String(T0 + 4 * 60_000), // two horizons of 2 windows each
      "user:u1": `${Math.floor(T0 / 60_000)}:1:0:60000`,
    });
    expect(await redis.pttl(page)).toBeGreaterThan(4 * 60_000 - 1_000);
    expect(await redis.pttl(page)).toBeLessThanOrEqual(4 * 60_000);
    expect(await redis.object("ENCODING", page)).toBe("listpack");
  });

  it("writes nothing for a refused request or a dry run", async () => {
    await check([fixedWindow], 1, true);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    await check([fixedWindow], 3);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });

  it("opens the other page once the current one is a horizon old, and moves the bucket there", async () => {
    await check([fixedWindow]);
    clock.advance(2 * 60_000);
    await check([fixedWindow]);
    const [a, b] = [`${prefix}{r1:0}:a`, `${prefix}{r1:0}:b`];
    expect(await redis.hgetall(a)).toEqual({ _o: String(T0), _u: String(T0 + 4 * 60_000) });
    expect(await redis.hgetall(b)).toEqual({
      _o: String(T0 + 2 * 60_000),
      _u: String(T0 + 6 * 60_000),
      "user:u1": `${Math.floor(T0 / 60_000) + 2}:1:0:60000`,
    });
    clock.advance(2 * 60_000); // a has nothing alive: it is wiped and reopened
    await check([fixedWindow]);
    expect(await redis.hgetall(a)).toEqual({
      _o: String(T0 + 4 * 60_000),
      _u: String(T0 + 8 * 60_000),
      "user:u1": `${Math.floor(T0 / 60_000) + 4}:1:0:60000`,
    });
    expect(await redis.hgetall(b)).toEqual({ _o: String(T0 + 2 * 60_000), _u: String(T0 + 6 * 60_000) });
  });

  it("keeps a SLIDING_WINDOW_LOG bucket as a list of release times that expires a window after the last", async () => {
    const log: BucketRef = {
      ruleId: "r2",
      key: "ip:10.0.0.1",
      params: { algorithm: "SLIDING_WINDOW_LOG", limit: 5, windowMs: 10_000, capacity: 5, action: "REJECT" },
    };
    await check([log], 2);
    clock.advance(1_500);
    await check([log]);
    const key = `${prefix}{r2:0}:l:ip:10.0.0.1`;
    expect(await redis.lrange(key, 0, -1)).toEqual([String(T0), String(T0), String(T0 + 1_500)]);
    expect(await redis.pttl(key)).toBeGreaterThan(9_000);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(10_000);
    clock.advance(9_000); // the first two have left the window
    await check([log], 1, true);
    expect(await redis.llen(key)).toBe(3); // a dry run changes nothing
    await check([log]);
    expect(await redis.lrange(key, 0, -1)).toEqual([String(T0 + 1_500), String(T0 + 10_500)]); // trimmed by the call that appends
  });

  it("hashes long bucket keys into a bounded field", async () => {
    const long: BucketRef = { ...fixedWindow, key: `user:${"x".repeat(300)}` };
    await check([long]);
    const fields = Object.keys(await redis.hgetall(`${prefix}{r1:0}:a`)).filter((f) => !f.startsWith("_"));
    expect(fields).toHaveLength(1);
    expect(fields[0]).toMatch(/^#[A-Za-z0-9_-]{22}$/);
  });

  it("forgets a bucket with reset.lua, whatever its algorithm", async () => {
    await check([fixedWindow]);
    expect(await store.reset("r1", "user:u1")).toBe(true);
    expect(await redis.hgetall(`${prefix}{r1:0}:a`)).toEqual({ _o: String(T0), _u: String(T0 + 4 * 60_000) });
    expect(await store.reset("r1", "user:u1")).toBe(false);
  });

  it("reloads the script after SCRIPT FLUSH (NOSCRIPT) without failing a check", async () => {
    await check([fixedWindow]);
    await redis.script("FLUSH");
    const reply = await check([fixedWindow]);
    expect(reply.allowed).toBe(true);
    expect(reply.outcomes[0]!.remaining).toBe(0);
  });

  it("reads Redis TIME when no time is given", async () => {
    const live = new RedisCounterStore(redis, { layout });
    const before = Date.now();
    const [reply] = await live.decide([{ buckets: [{ ...fixedWindow, ruleId: "live" }], cost: 1, dryRun: true }]);
    expect(Math.abs(reply!.nowMs - before)).toBeLessThan(2_000);
  });
});
