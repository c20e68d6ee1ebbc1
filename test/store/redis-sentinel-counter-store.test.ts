/**
 * The Redis store through Redis Sentinel (a master, a replica and a sentinel
 * of this suite's own), on the client the service makes: the conformance
 * suite unchanged, then a failover the sentinel performs, which the client
 * must follow at once with the counters intact.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BucketRef } from "../../src/domain/ports.js";
import { createRedisClient } from "../../src/store/redis/client.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { startRedisSentinel, type LocalRedisSentinel } from "../harness/local-redis.js";
import { redisBinariesAvailable } from "../support/services.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

describe.runIf(await redisBinariesAvailable())("redis sentinel", () => {
  let group: LocalRedisSentinel;
  let suite = 0;
  const connect = async () => {
    const client = createRedisClient({ kind: "sentinel", sentinels: group.sentinels, masterName: group.masterName }, 5_000);
    client.on("error", () => undefined); // reconnecting during the failover; the checks say what failed
    await client.connect();
    return client;
  };

  beforeAll(async () => {
    group = await startRedisSentinel();
  });
  afterAll(() => group?.stop());

  counterStoreConformance("redis sentinel", async (clock) => {
    const store = new RedisCounterStore(await connect(), { layout: new KeyLayout(`fgtest:${++suite}:`, 64), clock });
    return { store, cleanup: () => store.close() };
  });

  it("follows the sentinel to the promoted replica as soon as it is announced, counters intact", async () => {
    const client = await connect();
    const store = new RedisCounterStore(client, { layout: new KeyLayout("fgtest:failover:", 64), clock: new ManualClock() });
    const bucket: BucketRef = {
      ruleId: "r",
      key: "user:u1",
      params: { algorithm: "FIXED_WINDOW", limit: 5, windowMs: 60_000, capacity: 5, action: "REJECT" },
    };
    const check = async () => (await store.decide([{ buckets: [bucket], cost: 1, dryRun: false }]))[0]!;
    for (let i = 0; i < 3; i++) await check();
    expect(await client.wait(1, 5_000)).toBe(1); // the replica has every write
    const before = client.stream.remotePort;

    const promoted = await group.failover();
    expect(promoted.port).not.toBe(before);
    // On the sentinel's +switch-master the client drops the old master, still
    // reachable and still taking writes, and asks the sentinel again.
    for (let waited = 0; client.status !== "ready" || client.stream.remotePort !== promoted.port; waited += 20) {
      expect(waited, "the client still talks to the old master").toBeLessThan(5_000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect((await check()).outcomes[0]!.remaining).toBe(1);
    await store.close();
  });
});
