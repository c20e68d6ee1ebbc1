/**
 * The counter stores the model tests hold against the reference model: the
 * in-process store always, and real Redis and a real Redis Cluster (started
 * for the suite) where this machine has them. Call it inside a describe: it
 * registers its own set-up and tear-down there.
 */

import { Cluster, type Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import type { CounterStore } from "../../src/domain/ports.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import type { ManualClock } from "../support/clock.js";
import { startRedisCluster, type LocalRedisCluster } from "../harness/local-redis.js";
import { testRedis } from "../support/redis.js";

export interface StoreSubjects {
  /** A fresh store of each kind on `clock`. */
  stores(clock: ManualClock): CounterStore[];
  /** The suite's own Redis and key layout; null without Redis. */
  redis(): { redis: Redis; layout: KeyLayout } | null;
}

export function useStoreSubjects({ withRedis, withCluster }: { withRedis: boolean; withCluster: boolean }): StoreSubjects {
  let redis: Redis | null = null;
  let cleanup: () => Promise<void> = async () => undefined;
  let layout: KeyLayout;
  let cluster: LocalRedisCluster | null = null;
  let clusterClient: Cluster | null = null;

  beforeAll(async () => {
    if (withRedis) {
      const r = testRedis();
      redis = r.redis;
      cleanup = r.cleanup;
      layout = new KeyLayout(r.prefix, 8);
    }
    if (withCluster) {
      cluster = await startRedisCluster({ replicasPerMaster: 0 });
      clusterClient = new Cluster(cluster.nodes);
    }
  });
  afterAll(async () => {
    clusterClient?.disconnect();
    await cluster?.stop();
    await cleanup();
  });

  return {
    stores(clock) {
      const subjects: CounterStore[] = [new MemoryCounterStore({ clock, sweepIntervalMs: 0 })];
      if (redis) subjects.push(new RedisCounterStore(redis, { layout, clock }));
      if (clusterClient) subjects.push(new RedisCounterStore(clusterClient, { layout: new KeyLayout("fg:", 8), clock }));
      return subjects;
    },
    redis: () => (redis === null ? null : { redis, layout }),
  };
}
