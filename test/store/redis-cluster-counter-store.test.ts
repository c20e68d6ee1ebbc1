/**
 * The Redis store on a real Redis Cluster of this suite's own (3 masters, 3
 * replicas on loopback): the shared conformance suite unchanged, then what
 * only a cluster has: calls whose rules span slots, decided by reserve and
 * release.
 */

import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { BucketRef, CounterCall } from "../../src/domain/ports.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { MODE } from "../../src/store/redis/script-codes.js";
import { decideArgs, type ScriptArgs, type ScriptedRedis } from "../../src/store/redis/scripts.js";
import { ManualClock } from "../support/clock.js";
import { startRedisCluster, type LocalRedisCluster } from "../harness/local-redis.js";
import { redisBinariesAvailable } from "../support/services.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const PAGES = 64;

describe.runIf(await redisBinariesAvailable())("redis cluster", () => {
  let cluster: LocalRedisCluster;
  let suite = 0;
  const newPrefix = () => `fgtest:${++suite}:`;

  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(() => cluster?.stop());

  counterStoreConformance("redis cluster", async (clock) => {
    const client = new Cluster(cluster.nodes);
    const store = new RedisCounterStore(client, { layout: new KeyLayout(newPrefix(), PAGES), clock });
    return { store, cleanup: () => store.close() };
  });

  describe("calls across slots", () => {
    let client: Cluster;
    let layout: KeyLayout;
    let clock: ManualClock;
    let store: RedisCounterStore;
    let releaseFailures: { error: unknown; units: number }[];
    let scripts: ReturnType<typeof spyOnScripts>;

    beforeEach(async () => {
      client = await connected(new Cluster(cluster.nodes));
      layout = new KeyLayout(newPrefix(), PAGES);
      clock = new ManualClock(T0);
      releaseFailures = [];
      store = new RedisCounterStore(client, { layout, clock, onReleaseFailed: (error, units) => releaseFailures.push({ error, units }) });
      scripts = spyOnScripts(client as ScriptedRedis);
      return () => store.close();
    });

    const fixedWindow = (ruleId: string, limit: number): BucketRef => ({
      ruleId,
      key: "user:u1",
      params: { algorithm: "FIXED_WINDOW", limit, windowMs: 10_000, capacity: limit, action: "REJECT" },
    });
    const slotOf = (bucket: BucketRef) => layout.slotOf(bucket.ruleId, layout.field(bucket.key));
    const check = async (buckets: BucketRef[], cost = 1, dryRun = false) => (await store.decide([{ buckets, cost, dryRun }]))[0]!;
    /** Units the bucket could still admit (a dry run reports the bucket as if the unit it asks for were admitted). */
    const free = async (bucket: BucketRef) => {
      const reply = await check([bucket], 1, true);
      return reply.allowed ? reply.outcomes[0]!.remaining + 1 : 0;
    };

    /** A rule id whose bucket lands on another master than every bucket given (a different node, so a different slot). */
    async function onAnotherMaster(prefix: string, limit: number, ...others: BucketRef[]): Promise<BucketRef> {
      const taken = await Promise.all(others.map(async (b) => (await cluster.masterOf(slotOf(b))).port));
      for (let i = 0; ; i++) {
        const bucket = fixedWindow(`${prefix}${i}`, limit);
        if (!taken.includes((await cluster.masterOf(slotOf(bucket))).port)) return bucket;
      }
    }

    it("computes the same slot as the cluster for every key of a bucket", async () => {
      for (const ruleId of ["a", "rule-42", "9f1c2d3e-0000-4000-8000-000000000000"]) {
        const keys = layout.keysOf(ruleId, layout.field("user:u1"));
        for (const key of [keys.pageA, keys.pageB, keys.log]) {
          expect(await client.cluster("KEYSLOT", key)).toBe(layout.slotOf(ruleId, layout.field("user:u1")));
        }
      }
    });

    it("decides a call in one script when its buckets share a slot", async () => {
      const first = fixedWindow("same-0", 1);
      let second = fixedWindow("same-1", 5);
      for (let i = 2; slotOf(second) !== slotOf(first); i++) second = fixedWindow(`same-${i}`, 5);
      expect((await check([first, second])).allowed).toBe(true);
      expect((await check([first, second])).allowed).toBe(false);
      expect(scripts.modes()).toEqual([MODE.DECIDE, MODE.DECIDE]);
      expect(await free(second)).toBe(4);
    });

    it("reserves in every slot, keeps the units when all admit, and releases them where taken when one refuses", async () => {
      const tight = fixedWindow("tight", 1);
      const loose = await onAnotherMaster("loose-", 10, tight);
      const admitted = await check([tight, loose]);
      expect(admitted.allowed).toBe(true);
      expect(admitted.outcomes.map((o) => o.remaining)).toEqual([0, 9]);
      expect(scripts.modes()).toEqual([MODE.RESERVE, MODE.RESERVE]);

      scripts.clear();
      const refused = await check([tight, loose]);
      expect(refused).toEqual({
        nowMs: T0,
        allowed: false,
        outcomes: [
          { conforming: false, remaining: 0, resetAtMs: T0 + 10_000, retryAfterMs: 10_000, delayMs: 0 },
          // as the bucket stands: its reservation given back
          { conforming: true, remaining: 9, resetAtMs: T0 + 10_000, retryAfterMs: null, delayMs: 0 },
        ],
      });
      // Only the slot that took units releases them.
      expect(scripts.modes()).toEqual([MODE.RESERVE, MODE.RESERVE, MODE.RELEASE]);
      expect(scripts.keysOf(2)).toEqual(scripts.keysOf(1));
      expect(await scripts.replies[2]).toEqual([T0, 2]);
      expect(await free(loose)).toBe(9);
    });

    it("sends a dry run across slots as reserves that take nothing", async () => {
      const tight = fixedWindow("tight", 1);
      const loose = await onAnotherMaster("loose-", 10, tight);
      expect((await check([tight, loose], 1, true)).outcomes.map((o) => o.remaining)).toEqual([0, 9]);
      expect(scripts.modes()).toEqual([MODE.RESERVE | MODE.DRY_RUN, MODE.RESERVE | MODE.DRY_RUN]);
      expect(await free(tight)).toBe(1);
      expect(await free(loose)).toBe(10);
    });

    it("fails a call when one of its slots fails, and gives back what the other slots took", async () => {
      const broken = fixedWindow("broken", 5);
      const healthy = await onAnotherMaster("healthy-", 5, broken);
      const page = layout.keysOf(broken.ruleId, layout.field(broken.key)).pageA;
      await client.set(page, "not a hash");
      await expect(check([broken, healthy])).rejects.toThrow(/WRONGTYPE/);
      expect(scripts.modes()).toEqual([MODE.RESERVE, MODE.RESERVE, MODE.RELEASE]);
      expect(await free(healthy)).toBe(5);
      await client.del(page);
    });

    it("fails alone a call whose slot misses the deadline, naming its master, and gives back its reserve once the answer comes", async () => {
      const prompt = fixedWindow("prompt", 10);
      const late = await onAnotherMaster("late-", 10, prompt);
      const slow = await cluster.masterOf(slotOf(late));
      const pauser = new Redis({ host: slow.host, port: slow.port });
      try {
        await pauser.call("CLIENT", "PAUSE", "500", "ALL");
        const { results, failedShards } = await store.decideEach(
          [
            { buckets: [prompt, late], cost: 3, dryRun: false },
            { buckets: [prompt], cost: 1, dryRun: false },
          ],
          100,
        );
        expect(results[0]).toEqual({ error: new Error("no answer from Redis within 100 ms") });
        // Decided while the failed call's reservation still counted (it goes back right after).
        expect(results[1]).toMatchObject({ allowed: true, outcomes: [{ remaining: 6 }] });
        expect(failedShards).toEqual(new Set([`${slow.host}:${slow.port}`]));
        // The paused master runs the reserve once the pause ends; its answer brings its release.
        for (let waited = 0; scripts.modes().filter((m) => m === MODE.RELEASE).length < 2; waited += 20) {
          if (waited > 10_000) throw new Error(`no release of the late reserve: ${scripts.modes().join(",")}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await Promise.all(scripts.replies);
        expect(await free(late)).toBe(10);
        expect(await free(prompt)).toBe(9);
      } finally {
        pauser.disconnect();
      }
    });

    it("keeps a denial when giving a reservation back fails, and reports the units left counted", async () => {
      const tight = fixedWindow("tight", 1);
      const loose = await onAnotherMaster("loose-", 10, tight);
      await check([tight]);
      scripts.failReleases(new Error("connection lost"));
      const refused = await check([tight, loose], 3);
      expect(refused.allowed).toBe(false);
      expect(releaseFailures).toEqual([{ error: new Error("connection lost"), units: 3 }]);
      expect(await free(loose)).toBe(7); // the over-count: bounded by the cost, gone with the window
      clock.advance(10_000);
      expect(await free(loose)).toBe(10);
    });

    it("bounds an abandoned reservation: its units count until they would have left the window, and nothing is over-admitted", async () => {
      // An instance reserved 4 units in the loose slot and died before it could release them.
      const tight = fixedWindow("tight", 1);
      const loose = await onAnotherMaster("loose-", 10, tight);
      const abandoned: CounterCall = { buckets: [tight, loose], cost: 4, dryRun: false };
      const reserve = decideArgs(layout, abandoned, [1], MODE.RESERVE, clock.now());
      const reserved = await (client as ScriptedRedis).floodgateDecide(...reserve);
      // The reservation's receipt: what it took.
      expect(Array.isArray(reserved) && String(reserved.at(-1))).toMatch(/^\d/);

      const admitted: boolean[] = [];
      for (let i = 0; i < 10; i++) admitted.push((await check([loose])).allowed);
      expect(admitted.filter(Boolean)).toHaveLength(6); // 10 - 4: an over-count of the reserved units, never more admitted than the limit
      clock.advance(10_000); // the window the units were taken in is over
      expect(await free(loose)).toBe(10);
    });
  });
});

/** Records every decide.lua run (its mode, keys and reply); can make releases fail. */
function spyOnScripts(client: ScriptedRedis) {
  const original = client.floodgateDecide.bind(client);
  const calls: ScriptArgs[] = [];
  const replies: Promise<unknown>[] = [];
  let releaseError: Error | null = null;
  // The head, after the keys: "<cost>:<mode>[:<now>]".
  const modeOf = (args: ScriptArgs) => Number(String(args[args[0] + 1]).split(":")[1]);
  vi.spyOn(client, "floodgateDecide").mockImplementation((...args: ScriptArgs) => {
    calls.push(args);
    const reply = releaseError && modeOf(args) === MODE.RELEASE ? Promise.reject(releaseError) : original(...args);
    replies.push(reply.catch((error: unknown) => error));
    return reply;
  });
  return {
    replies,
    modes: () => calls.map(modeOf),
    keysOf: (i: number) => calls[i]!.slice(1, calls[i]![0] + 1),
    failReleases: (error: Error) => (releaseError = error),
    clear: () => {
      calls.length = 0;
      replies.length = 0;
    },
  };
}

/**
 * Resolves once the client knows the cluster's slots. ioredis sends CLUSTER
 * commands (KEYSLOT here) at once even before that, bypassing its offline
 * queue, to whichever startup connection is at hand, and that connection can
 * be closed as the client settles its pool: "Connection is closed".
 */
function connected(client: Cluster): Promise<Cluster> {
  if (client.status === "ready") return Promise.resolve(client);
  return new Promise((resolve, reject) => {
    client.once("ready", () => resolve(client));
    client.once("error", reject);
  });
}
