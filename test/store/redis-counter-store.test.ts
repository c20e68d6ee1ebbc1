import { describe } from "vitest";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

describe.runIf(await redisAvailable())("redis", () => {
  counterStoreConformance("redis", async (clock) => {
    const { redis, prefix, cleanup } = testRedis();
    const store = new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 64), clock });
    return { store, cleanup };
  });
});
