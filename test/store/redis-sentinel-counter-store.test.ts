/**
 * The Redis store through Redis Sentinel (a master, a replica and a sentinel
 * of this suite's own): the conformance suite unchanged, then a failover the
 * sentinel performs, which the client must follow with the counters intact.
 */

import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BucketRef } from "../../src/domain/ports.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { startRedisSentinel, type LocalRedisSentinel } from "../support/local-redis.js";
import { redisBinariesAvailable } from "../support/services.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

describe.runIf(await redisBinariesAvailable())("redis sentinel", () => {
  let group: LocalRedisSentinel;
  let suite = 0;
  const connect = () => new Redis({ sentinels: group.sentinels, name: group.masterName, enableAutoPipelining: true });

  beforeAll(async () => {
    group = await startRedisSentinel();
  });
  afterAll(() => group?.stop());

  counterStoreConformance("redis sentinel", async (clock) => {
    const store = new RedisCounterStore(connect(), { layout: new KeyLayout(`fgtest:${++suite}:`, 64), clock });
    return { store, cleanup: () => store.close() };
  });

  it("follows the sentinel to the promoted replica, counters intact", async () => {
    const client = connect();
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
    // The demoted master has dropped its clients; the client asks the sentinel again.
    let reply: Awaited<ReturnType<typeof check>> | null = null;
    for (let attempt = 0; reply === null && attempt < 100; attempt++) {
      reply = await check().catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return null;
      });
    }
    expect(reply?.outcomes[0]!.remaining).toBe(1);
    expect(client.stream.remotePort).toBe(promoted.port);
    expect(promoted.port).not.toBe(before);
    await store.close();
  });
});
