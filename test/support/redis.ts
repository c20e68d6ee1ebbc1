import { Redis } from "ioredis";
import { deleteByPrefix } from "../harness/delete-by-prefix.js";
import { REDIS_URL } from "./services.js";

/** A client and a key prefix of this test's own, so tests sharing the machine's Redis never see each other's keys. */
export function testRedis(): { redis: Redis; prefix: string; cleanup(): Promise<void> } {
  // As Floodgate's own client (src/store/redis/client.ts): no auto-pipelining.
  const redis = new Redis(REDIS_URL, { enableAutoPipelining: false });
  const prefix = `fgtest:${process.pid}:${Math.random().toString(36).slice(2, 8)}:`;
  return {
    redis,
    prefix,
    cleanup: async () => {
      await deleteByPrefix(redis, prefix);
      redis.disconnect();
    },
  };
}
