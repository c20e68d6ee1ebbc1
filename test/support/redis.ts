import { Redis } from "ioredis";
import { REDIS_URL } from "./services.js";

/** A client and a key prefix of this test's own, so tests sharing the machine's Redis never see each other's keys. */
export function testRedis(): { redis: Redis; prefix: string; cleanup(): Promise<void> } {
  const redis = new Redis(REDIS_URL, { enableAutoPipelining: true });
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

export async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}
