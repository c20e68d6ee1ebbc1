/**
 * One circuit breaker per Redis Cluster master, through the whole service.
 *
 * A 3-master cluster (no replicas, so the lost slots stay lost; and
 * cluster-require-full-coverage no, so the other masters keep serving, as
 * they do in production once an operator chooses it) loses a master to
 * SIGKILL. Every batch mixes checks on the lost master's slots, checks on the
 * others', and cross-slot checks of both kinds: the healthy ones stay decided
 * by Redis, the ones touching the lost master are decided by failure mode
 * whole, and a cross-slot check that touched it leaves nothing counted on the
 * healthy master. The breakers, in /readyz and /metrics, name each master.
 *
 * Then a cluster with replicas: once a replica is promoted, checks on the lost
 * slots come back to Redis and the breakers are those of the masters there
 * are, the promoted replica's included and the dead master's gone.
 */

import { Cluster } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { loadSettings } from "../../src/config/settings.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { CheckLimitsBatchDocument, CheckLimitsDocument, CreateRuleDocument } from "../generated/graphql.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { startRedisCluster, type ClusterOptions, type HostPort, type LocalRedisCluster } from "../harness/local-redis.js";
import { redisBinariesAvailable } from "../support/services.js";

const PREFIX = "fgbreakers:";
const layout = new KeyLayout(PREFIX, loadSettings({}).redisPages);
const address = (node: HostPort) => `${node.host}:${node.port}`;
/** A cluster, a service on it and the whole test: seconds each on a loaded machine. */
const SLOW = { timeout: 120_000 };

describe.runIf(await redisBinariesAvailable())("a circuit breaker per Redis Cluster master", () => {
  let cluster: LocalRedisCluster | undefined;
  let service: TestApp | undefined;
  afterEach(async () => {
    await service?.stop();
    await cluster?.stop();
  });

  async function start(options: ClusterOptions, breakerOpenMs: number): Promise<{ cluster: LocalRedisCluster; service: TestApp }> {
    cluster = await startRedisCluster({ masters: 3, requireFullCoverage: false, ...options });
    service = await startTestApp("embedded", {
      REDIS_CLUSTER_NODES: cluster.nodes.map(address).join(","),
      REDIS_KEY_PREFIX: PREFIX,
      REDIS_TIMEOUT_MS: "1000",
      REDIS_BREAKER_FAILURES: "2",
      REDIS_BREAKER_OPEN_MS: String(breakerOpenMs),
    });
    return { cluster, service };
  }

  const createRule = async (client: GraphQLClient, tenantId: string, name: string) =>
    (
      await client.data(CreateRuleDocument, {
        input: { tenantId, name, scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 1000, window: 1, windowUnit: "HOURS", failureMode: "CLOSED" },
      })
    ).createRule.id;
  /** The master holding a rule's bucket for a user ("user:<id>" is the bucket key of a USER-scoped rule of a tenant). */
  const masterOf = async (cluster: LocalRedisCluster, ruleId: string, user: string) =>
    address(await cluster.masterOf(layout.slotOf(ruleId, layout.field(`user:${user}`))));
  const findUser = async (wanted: (user: string) => Promise<boolean>) => {
    for (let i = 0; ; i++) if (await wanted(`u${i}`)) return `u${i}`;
  };
  const breakersOf = async (service: TestApp) =>
    ((await (await fetch(service.app.url.replace("/graphql", "/readyz"))).json()) as { counters: { breakers: Record<string, string> } }).counters.breakers;
  const metricsOf = async (service: TestApp) =>
    (await fetch(service.app.url.replace("/graphql", "/metrics"), { headers: { authorization: `Bearer ${service.adminToken}` } })).text();

  it("keeps checks on healthy masters on Redis while those touching the lost one go by failure mode, whole", SLOW, async () => {
    // A breaker that stays open for the whole test: no half-open trial, which would be degraded too but say nothing new.
    const { cluster, service } = await start({ replicasPerMaster: 0 }, 600_000);
    const { client } = service;
    const single = await createRule(client, "single", "per-user");
    const first = await createRule(client, "double", "per-user");
    const second = await createRule(client, "double", "per-user, again");
    const victim = await cluster.masterOf(0);
    const lost = address(victim);
    const singleLost = await findUser(async (u) => (await masterOf(cluster, single, u)) === lost);
    const singleHealthy = await findUser(async (u) => (await masterOf(cluster, single, u)) !== lost);
    // Both buckets on healthy masters, on two different ones: reserved and released across slots.
    const doubleHealthy = await findUser(async (u) => {
      const [a, b] = [await masterOf(cluster, first, u), await masterOf(cluster, second, u)];
      return a !== lost && b !== lost && a !== b;
    });
    // One bucket on a healthy master, the other on the lost one.
    const doubleLost = await findUser(async (u) => (await masterOf(cluster, first, u)) !== lost && (await masterOf(cluster, second, u)) === lost);
    const requests = [
      { tenantId: "single", userId: singleLost },
      { tenantId: "single", userId: singleHealthy },
      { tenantId: "double", userId: doubleHealthy },
      { tenantId: "double", userId: doubleLost },
    ];
    const batch = async () => (await client.data(CheckLimitsBatchDocument, { requests })).checkLimitsBatch;
    expect((await batch()).map((d) => d.degraded)).toEqual([false, false, false, false]);

    // What the healthy half of the cross-slot check that will touch the lost master holds, as stored.
    const admin = new Cluster(cluster.nodes.filter((n) => n.port !== victim.port));
    try {
      const keys = layout.keysOf(first, layout.field(`user:${doubleLost}`));
      const stored = () => Promise.all([admin.hget(keys.pageA, `user:${doubleLost}`), admin.hget(keys.pageB, `user:${doubleLost}`)]);
      const before = await stored();
      expect(before).not.toEqual([null, null]);

      cluster.kill(victim);
      for (let round = 0; round < 5; round++) {
        const decisions = await batch();
        expect(decisions.map((d) => d.degraded), `round ${round}`).toEqual([true, false, false, true]);
        // CLOSED rules refuse while degraded; the healthy checks are admitted by Redis.
        expect(decisions.map((d) => d.allowed), `round ${round}`).toEqual([false, true, true, false]);
      }
      const alone = (await client.data(CheckLimitsDocument, { request: { tenantId: "single", userId: singleHealthy } })).checkLimits;
      expect(alone).toMatchObject({ degraded: false, remaining: 1000 - 7 });
      // The cross-slot check that touched the lost master counted nothing more on the healthy one.
      expect(await stored()).toEqual(before);
    } finally {
      admin.disconnect();
    }

    const healthy = cluster.nodes.filter((n) => n.port !== victim.port).map(address);
    expect(await breakersOf(service)).toEqual(Object.fromEntries([[lost, "open"], ...healthy.map((node) => [node, "closed"])]));
    const metrics = await metricsOf(service);
    expect(metrics).toContain(`floodgate_circuit_breaker_state{node="${lost}"} 2`);
    for (const node of healthy) expect(metrics).toContain(`floodgate_circuit_breaker_state{node="${node}"} 0`);
  });

  it("follows a failover: the promoted replica gets a breaker of its own, and the dead master's is forgotten", SLOW, async () => {
    const { cluster, service } = await start({ replicasPerMaster: 1, nodeTimeoutMs: 1000 }, 200);
    const { client } = service;
    const rule = await createRule(client, "failover", "per-user");
    const victim = await cluster.masterOf(0);
    const user = await findUser(async (u) => (await masterOf(cluster, rule, u)) === address(victim));
    const check = async () => (await client.data(CheckLimitsDocument, { request: { tenantId: "failover", userId: user } })).checkLimits;
    expect((await check()).degraded).toBe(false);

    cluster.kill(victim);
    const waitFor = async (what: string, done: () => Promise<boolean>) => {
      for (const deadline = Date.now() + 30_000; !(await done()); await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() > deadline) throw new Error(`no ${what} within 30 s`);
      }
    };
    await waitFor("promotion", async () => (await cluster.masterOf(layout.slotOf(rule, layout.field(`user:${user}`)))).port !== victim.port);
    await waitFor("check decided by Redis again", async () => !(await check()).degraded);

    // The check that came back went to the dead master's breaker (its half-open trial, redirected by
    // MOVED); the client then learns the new topology, and the next checks name the promoted replica.
    const promoted = await masterOf(cluster, rule, user);
    await waitFor("breakers to follow the promotion", async () => {
      expect((await check()).degraded).toBe(false);
      const breakers = await breakersOf(service);
      return breakers[promoted] === "closed" && !(address(victim) in breakers);
    });
    const masters = new Set(await Promise.all([0, 8000, 16383].map(async (slot) => address(await cluster.masterOf(slot)))));
    expect(Object.keys(await breakersOf(service)).filter((node) => !masters.has(node))).toEqual([]);
    expect(await metricsOf(service)).not.toContain(`node="${address(victim)}"`);
  });
});
