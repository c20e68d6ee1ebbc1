/**
 * The failure modes, on a real Redis that the test kills and restarts, and on
 * a Redis Cluster whose masters it kills. The breakers and the local counters
 * run on a ManualClock, so nothing waits for a breaker; only Redis itself
 * really dies.
 */

import type { Cluster, Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { UnavailableError } from "../../src/domain/errors.js";
import type { BucketRef, CounterReply } from "../../src/domain/ports.js";
import type { FailureMode } from "../../src/domain/rule.js";
import { ResilientCounterStore, type ResilientCounterStoreOptions } from "../../src/store/resilient-counter-store.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { createRedisClient } from "../../src/store/redis/client.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { startRedisCluster, type HostPort, type LocalRedisCluster } from "../harness/local-redis.js";
import { startOwnRedis, type OwnRedis } from "../harness/redis-server.js";
import { redisBinariesAvailable } from "../support/services.js";

const params = (limit: number): LimitParams => ({ algorithm: "FIXED_WINDOW", limit, windowMs: 60_000, capacity: limit, action: "REJECT" });
const bucket = (ruleId: string, failureMode: FailureMode, limit = 10): BucketRef => ({ ruleId, key: "user:u1", params: params(limit), failureMode });

describe("ResilientCounterStore on a Redis that dies", () => {
  let redis: OwnRedis;
  let client: Redis;
  /** The tests' own reads and writes, on a client that waits as long as a loaded machine needs: client's 50 ms is the store's. */
  let admin: Redis;
  let clock: ManualClock;
  let store: ResilientCounterStore;

  beforeAll(async () => {
    redis = await startOwnRedis();
    client = createRedisClient({ kind: "single", url: redis.url }, 50);
    client.on("error", () => undefined);
    await client.connect();
    admin = createRedisClient({ kind: "single", url: redis.url }, 5_000);
    admin.on("error", () => undefined);
    await admin.connect();
  });
  afterAll(async () => {
    client.disconnect();
    admin.disconnect();
    await redis.stop();
  });
  beforeEach(async () => {
    if (client.status !== "ready") {
      await redis.restart();
      await waitUntilReady(client);
    }
    // A test that restarted Redis itself waited for client only.
    await waitUntilReady(admin);
    await admin.flushall();
    clock = new ManualClock();
    store = storeOn(client);
  });

  /** The store under test on a client of Redis: 50 ms deadline unless given, a breaker opening after 3 failures, 4 instances. */
  const storeOn = (redisClient: Redis, options: Partial<ResilientCounterStoreOptions> = {}): ResilientCounterStore =>
    new ResilientCounterStore({
      primary: new RedisCounterStore(redisClient, { layout: new KeyLayout("fg:", 16) }),
      local: new MemoryCounterStore({ clock, sweepIntervalMs: 0 }),
      breakers: { failureThreshold: 3, openMs: 1000 },
      instances: 4,
      timeoutMs: 50,
      clock,
      ...options,
    });

  const patients: Redis[] = [];
  afterEach(() => {
    for (const patient of patients.splice(0)) patient.disconnect();
  });

  /**
   * The store on a client that waits as long as a loaded machine needs (5 s):
   * for tests of which calls Redis decides, where 50 ms, missed by a busy
   * machine, would send healthy calls to their failure mode.
   */
  async function patientStore(options: Partial<ResilientCounterStoreOptions> = {}): Promise<ResilientCounterStore> {
    const patient = createRedisClient({ kind: "single", url: redis.url }, 5_000);
    patients.push(patient);
    await patient.connect();
    return storeOn(patient, { timeoutMs: 5_000, ...options });
  }

  const check = async (buckets: BucketRef[], cost = 1): Promise<CounterReply> => (await store.decide([{ buckets, cost, dryRun: false }]))[0]!;

  it("decides through Redis while it is up, not degraded", async () => {
    store = await patientStore();
    const reply = await check([bucket("up", "CLOSED")]);
    expect(reply.degraded).toBeUndefined();
    expect(reply.allowed).toBe(true);
    expect(await admin.keys("fg:*")).not.toEqual([]);
  });

  it("decides each rule by its failure mode once Redis is gone, and says degraded", async () => {
    await redis.kill();
    const open = await check([bucket("open", "OPEN")]);
    expect(open).toMatchObject({ allowed: true, degraded: true });
    expect(open.outcomes[0]).toMatchObject({ conforming: true, remaining: 10 });

    const closed = await check([bucket("closed", "CLOSED")]);
    expect(closed).toMatchObject({ allowed: false, degraded: true });
    expect(closed.outcomes[0]!.retryAfterMs).toBeGreaterThanOrEqual(1000);
  });

  it("decides by failure mode when Redis answers too late, and counts that as a failure", async () => {
    const admin = createRedisClient({ kind: "single", url: redis.url }, 1000);
    await admin.connect();
    await admin.call("CLIENT", "PAUSE", "300", "ALL");
    const reply = await check([bucket("slow", "CLOSED")]);
    await admin.call("CLIENT", "UNPAUSE");
    admin.disconnect();
    expect(reply).toMatchObject({ allowed: false, degraded: true });
  });

  it("decides every call of a batch by failure mode when their decide_each answers after the store's deadline", async () => {
    // A client that would wait: only the store's own deadline can cut the calls short.
    const patient = createRedisClient({ kind: "single", url: redis.url }, 5_000);
    const admin = createRedisClient({ kind: "single", url: redis.url }, 1000);
    await Promise.all([patient.connect(), admin.connect()]);
    const batchStore = storeOn(patient);
    await admin.call("CLIENT", "PAUSE", "300", "ALL");
    const calls = ["OPEN", "CLOSED", "CLOSED"].map((mode, i) => ({ buckets: [bucket(`slow-batch-${i}`, mode as "OPEN" | "CLOSED")], cost: 1, dryRun: false }));
    const replies = await batchStore.decide(calls);
    await admin.call("CLIENT", "UNPAUSE");
    admin.disconnect();
    patient.disconnect();
    expect(replies.map((r) => [r.allowed, r.degraded])).toEqual([
      [true, true],
      [false, true],
      [false, true],
    ]);
  });

  it("waits no longer than a caller's shorter budget, and does not hold the calls it cut short against the breaker", async () => {
    const admin = createRedisClient({ kind: "single", url: redis.url }, 1000);
    await admin.connect();
    await admin.call("CLIENT", "PAUSE", "400", "ALL");
    const replies: CounterReply[] = [];
    for (let i = 0; i < 3; i++) replies.push((await store.decide([{ buckets: [bucket("budget", "CLOSED")], cost: 1, dryRun: false }], { budgetMs: 10 }))[0]!);
    await admin.call("CLIENT", "UNPAUSE");
    admin.disconnect();
    for (const reply of replies) expect(reply).toMatchObject({ allowed: false, degraded: true });
    expect(Object.values(store.breakerStates())).toEqual(["closed"]);
  });

  it("sends nothing to the store for a caller whose budget is already spent", async () => {
    const [reply] = await store.decide([{ buckets: [bucket("spent", "OPEN")], cost: 1, dryRun: false }], { budgetMs: 0 });
    expect(reply).toMatchObject({ allowed: true, degraded: true });
    expect(await admin.keys("fg:*")).toEqual([]);
  });

  it("gives a LOCAL rule this instance's share of the limit: limit divided by the instance count", async () => {
    await redis.kill();
    const local = bucket("local", "LOCAL", 10); // 4 instances: floor(10 / 4) = 2 here
    const decisions: boolean[] = [];
    for (let i = 0; i < 4; i++) decisions.push((await check([local])).allowed);
    expect(decisions).toEqual([true, true, false, false]);
  });

  it("keeps the request all or nothing: a CLOSED refusal leaves the LOCAL counters untouched", async () => {
    await redis.kill();
    const local = bucket("local-mixed", "LOCAL", 8);
    const refused = await check([local, bucket("closed-mixed", "CLOSED")]);
    expect(refused.allowed).toBe(false);
    expect(refused.outcomes[0]).toMatchObject({ conforming: true, remaining: 2 });
    const alone = await check([local]);
    expect(alone.outcomes[0]!.remaining).toBe(1); // the share is 2: the refused request took nothing
  });

  it("opens the breaker after consecutive failures, then skips Redis until its open time has passed", async () => {
    await redis.kill();
    for (let i = 0; i < 3; i++) await check([bucket("b", "OPEN")]);
    expect(store.breakerStates()).toEqual({ [`127.0.0.1:${redis.port}`]: "open" });
    await redis.restart();
    await waitUntilReady(client);
    expect((await check([bucket("b", "OPEN")])).degraded).toBe(true);
    await waitUntilReady(admin);
    expect(await admin.dbsize()).toBe(0);
  });

  it("returns to Redis by itself when it comes back, through a half-open trial", async () => {
    store = await patientStore();
    await redis.kill();
    for (let i = 0; i < 3; i++) await check([bucket("back", "CLOSED")]);
    await redis.restart();
    await waitUntilReady(client);
    for (const patient of patients) await waitUntilReady(patient);
    clock.advance(1000);
    const reply = await check([bucket("back", "CLOSED")]);
    expect(reply.degraded).toBeUndefined();
    expect(reply.allowed).toBe(true);
    expect(store.breakerStates()).toEqual({ [`127.0.0.1:${redis.port}`]: "closed" });
  });

  it("decides each call of a batch on its own: the one Redis fails goes by failure mode, the others keep Redis's decisions", async () => {
    const broken = bucket("broken", "CLOSED");
    const layout = new KeyLayout("fg:", 16);
    await admin.set(layout.keysOf(broken.ruleId, layout.field(broken.key)).pageA, "not a hash");
    store = await patientStore();
    const [healthy, failed, alsoHealthy] = await store.decide([
      { buckets: [bucket("fine", "CLOSED")], cost: 1, dryRun: false },
      { buckets: [broken], cost: 1, dryRun: false },
      { buckets: [bucket("also-fine", "CLOSED")], cost: 1, dryRun: false },
    ]);
    expect(healthy).toMatchObject({ allowed: true, outcomes: [{ remaining: 9 }] });
    expect(healthy!.degraded).toBeUndefined();
    expect(failed).toMatchObject({ allowed: false, degraded: true });
    expect(alsoHealthy).toMatchObject({ allowed: true, outcomes: [{ remaining: 9 }] });
    expect(alsoHealthy!.degraded).toBeUndefined();
  });

  it("never opens the breaker for a bucket Redis answers it cannot decide (a key of another type, a calendar period Redis's clock is not in): that call alone goes by failure mode", async () => {
    const failed: unknown[] = [];
    store = await patientStore({ onCallFailed: (error) => failed.push(error) });
    const layout = new KeyLayout("fg:", 16);
    const wrongType = bucket("wrong-type", "CLOSED");
    await admin.set(layout.keysOf(wrongType.ruleId, layout.field(wrongType.key)).pageA, "not a hash");
    // This instance's clock a month ahead of Redis's: the six days it sends a DAY rule hold none of Redis's now, and decide.lua fails the call.
    const monthAhead: BucketRef = { ...bucket("month-ahead", "CLOSED"), params: { ...params(10), calendar: { period: "DAY", timeZone: "UTC", weekStartsOn: null } } };
    const realNow = Date.now.bind(Date);
    const instanceClock = vi.spyOn(Date, "now").mockImplementation(() => realNow() + 30 * 86_400_000);
    try {
      // Twice the breaker's threshold, alone (one FCALL each) and beside healthy calls (decide_each).
      for (let i = 0; i < 6; i++) {
        expect(await check([wrongType])).toMatchObject({ allowed: false, degraded: true });
        expect(await check([monthAhead])).toMatchObject({ allowed: false, degraded: true });
        const [poisoned, healthy] = await store.decide([
          { buckets: [monthAhead], cost: 1, dryRun: false },
          { buckets: [bucket("fine", "CLOSED")], cost: 1, dryRun: false },
        ]);
        expect(poisoned).toMatchObject({ allowed: false, degraded: true });
        expect(healthy).toMatchObject({ allowed: true, outcomes: [{ remaining: 9 - i }] });
        expect(healthy!.degraded).toBeUndefined();
      }
    } finally {
      instanceClock.mockRestore();
    }
    expect(store.breakerStates()).toEqual({ [`127.0.0.1:${redis.port}`]: "closed" });
    expect(failed).toHaveLength(18);
    expect(failed.map((e) => (e as Error).message.split(" ")[0])).toContain("WRONGTYPE");
    expect(failed.map((e) => (e as Error).message)).toContainEqual(expect.stringMatching(/^ERR user_function:\d+: /));
    // decide_each gives a call's Lua error without the "ERR " of a reply of its own.
    expect(failed.map((e) => (e as Error).message)).toContainEqual(expect.stringMatching(/^user_function:\d+: /));
  });

  it("holds a LOCAL CONCURRENCY rule's lease in this instance's counters while Redis is gone, and releases it there", async () => {
    await redis.kill();
    const inFlight: BucketRef = { ruleId: "local-leases", key: "user:u1", params: { algorithm: "CONCURRENCY", limit: 8, windowMs: 60_000, capacity: 8, action: "REJECT" }, failureMode: "LOCAL" };
    const hold = async (lease: string) => (await store.decide([{ buckets: [inFlight], cost: 1, dryRun: false, lease }]))[0]!;
    // 4 instances: a share of 2 slots here.
    expect([(await hold("a")).allowed, (await hold("b")).allowed, (await hold("c")).allowed]).toEqual([true, true, false]);
    expect(await store.releaseLease("a", [inFlight])).toBe(true);
    expect((await hold("c")).allowed).toBe(true);
    // A lease this instance does not hold is the store's to release: unreachable.
    await expect(store.releaseLease("a", [inFlight])).rejects.toBeInstanceOf(UnavailableError);
  });

  it("refuses to reset a bucket while Redis is gone, with a service-unavailable error", async () => {
    await redis.kill();
    await expect(store.reset("r", "user:u1")).rejects.toBeInstanceOf(UnavailableError);
  });
});

describe.runIf(await redisBinariesAvailable())("ResilientCounterStore on a Redis Cluster that loses masters", () => {
  let cluster: LocalRedisCluster;
  let client: Cluster;
  const layout = new KeyLayout("fg:", 16);

  beforeAll(async () => {
    // No replicas, and the other masters keep serving: lost slots stay lost.
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 0, requireFullCoverage: false });
    client = createRedisClient({ kind: "cluster", nodes: cluster.nodes }, 1000);
    client.on("error", () => undefined);
    await client.connect();
  });
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it("spends no half-open trial on a check that another master's open breaker holds back", async () => {
    const clock = new ManualClock();
    const store = new ResilientCounterStore({
      primary: new RedisCounterStore(client, { layout }),
      local: new MemoryCounterStore({ clock, sweepIntervalMs: 0 }),
      breakers: { failureThreshold: 1, openMs: 1000 },
      instances: 1,
      timeoutMs: 1000,
      clock,
    });
    const masterOf = async (b: BucketRef) => cluster.masterOf(layout.slotOf(b.ruleId, layout.field(b.key)));
    const onMaster = async (port: number, prefix: string) => {
      for (let i = 0; ; i++) if ((await masterOf(bucket(`${prefix}${i}`, "CLOSED"))).port === port) return bucket(`${prefix}${i}`, "CLOSED");
    };
    const [first, second] = cluster.nodes.slice(0, 2);
    const onFirst = await onMaster(first!.port, "first-");
    const onSecond = await onMaster(second!.port, "second-");
    const check = async (buckets: BucketRef[]) => (await store.decide([{ buckets, cost: 1, dryRun: false }]))[0]!;
    const stateOf = (node: HostPort) => store.breakerStates()[`${node.host}:${node.port}`];

    cluster.kill(first!);
    expect((await check([onFirst])).degraded).toBe(true);
    clock.advance(500);
    cluster.kill(second!);
    expect((await check([onSecond])).degraded).toBe(true);
    clock.advance(500); // the first master's breaker may try again; the second's may not yet
    expect([stateOf(first!), stateOf(second!)]).toEqual(["open", "open"]);

    expect((await check([onFirst, onSecond])).degraded).toBe(true);
    expect(stateOf(first!)).toBe("open"); // its trial is still there to take
    expect((await check([onFirst])).degraded).toBe(true);
    expect(stateOf(first!)).toBe("open"); // taken by this check, failed, open again for a full open time
    await store.close();
  });
});

async function waitUntilReady(client: Redis): Promise<void> {
  for (let attempt = 0; attempt < 100 && client.status !== "ready"; attempt++) await new Promise((r) => setTimeout(r, 50));
  if (client.status !== "ready") throw new Error(`Redis client still ${client.status}`);
}
