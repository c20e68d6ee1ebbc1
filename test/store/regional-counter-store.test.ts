/**
 * The regional store's outbox, on this machine's Redis: a GLOBAL bucket
 * counted while its state is being shipped must be shipped again at the next
 * round, or the other regions never learn of that count.
 */

import { afterEach, describe, expect, it } from "vitest";
import { limitParamsOf } from "../../src/domain/algorithms/index.js";
import type { BucketRef } from "../../src/domain/ports.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { RegionalCounterStore, type RegionPeer } from "../../src/store/regions/regional-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

describe.runIf(await redisAvailable())("RegionalCounterStore's outbox", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it("ships a bucket again when it was counted while its state was being shipped", async () => {
    const { redis, prefix, cleanup } = testRedis();
    cleanups.push(cleanup);
    const clock = new ManualClock();
    const local = new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 16), clock });
    const shipped: string[][] = [];
    const peer: RegionPeer = {
      name: "us",
      redis: { set: async () => "OK" },
      store: { mergeCopies: async (copies) => void shipped.push(copies.map((c) => c.state)), close: async () => undefined },
    };
    const store = new RegionalCounterStore({ local, localRedis: redis, region: "eu", peers: [peer], keyPrefix: prefix, syncMs: 60_000, partitionAfterMs: 60_000, partitionMode: "SHARE", clock });
    const bucket: BucketRef = { ruleId: "global", key: "tenant:t1", params: limitParamsOf({ algorithm: "FIXED_WINDOW", limit: 100, window: 1, windowUnit: "HOURS", burst: null, action: "REJECT", reach: "GLOBAL" }) };
    const count = () => store.decide([{ buckets: [bucket], cost: 1, dryRun: false }]);

    await count();
    // A second count lands after the first round has read the bucket's state, before it is done.
    const states = local.states.bind(local);
    local.states = async (buckets) => {
      const read = await states(buckets);
      local.states = states;
      await count();
      return read;
    };
    await store.sync();
    await store.sync();

    expect(shipped).toHaveLength(2);
    expect(shipped[1]).toHaveLength(1);
    expect(shipped[1]![0]).not.toBe(shipped[0]![0]);
  });
});
