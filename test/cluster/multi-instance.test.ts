/**
 * Three Floodgate instances on one Redis Cluster (3 masters, 3 replicas) and
 * one Postgres, many concurrent callers on shared buckets, every request
 * checked against rules whose buckets live on different masters. The rules
 * are created through one instance while all three run, so the others learn
 * them through the cluster's pub/sub. Afterwards: no bucket admitted more
 * than its rule allows, and every bucket holds exactly the units of the
 * requests that were admitted (a denied request took nothing anywhere,
 * whatever slot denied it).
 */

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSettings } from "../../src/config/settings.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { CheckTimedDocument, CreateRuleDocument, type CheckLimitsInput, type CreateRuleInput } from "../generated/graphql.js";
import { startTestApps } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { startRedisCluster, type LocalRedisCluster } from "../harness/local-redis.js";
import { postgresAvailable, redisBinariesAvailable } from "../support/services.js";

const HOUR_MS = 3_600_000;
const CALLERS = 48;
const REQUESTS = 480;

const available = (await redisBinariesAvailable()) && (await postgresAvailable());

interface Sample {
  user: string;
  ip: string;
  cost: number;
  allowed: boolean;
  degraded: boolean;
  atMs: number;
  /** rule id -> that rule's verdict */
  conforming: Map<string, boolean>;
}

describe.runIf(available)("three Floodgate instances on one Redis Cluster", () => {
  let cluster: LocalRedisCluster;
  let fleet: { apps: TestApp[]; stop(): Promise<void> };
  let clients: GraphQLClient[];
  let prefix: string;
  const tenantId = `t-${randomUUID()}`;
  const rules = { perUser: "", perTenant: "", perIp: "", shadow: "" };

  beforeAll(async () => {
    cluster = await startRedisCluster();
    fleet = await startTestApps(3, {
      REDIS_URL: "",
      REDIS_CLUSTER_NODES: cluster.nodes.map((n) => `${n.host}:${n.port}`).join(","),
      // Judged here is the cluster's arithmetic: every check goes to the cluster (no over-limit cache
      // answering refusals itself), and none may fall back to its failure mode on this busy 2-core machine.
      OVER_LIMIT_CACHE_SIZE: "0",
      REDIS_TIMEOUT_MS: "10000",
    });
    clients = fleet.apps.map((a) => a.client);
    prefix = fleet.apps[0]!.settings.redisKeyPrefix;
    const create = async (input: Omit<CreateRuleInput, "tenantId" | "window" | "windowUnit">) =>
      (await clients[0]!.data(CreateRuleDocument, { input: { tenantId, window: 1, windowUnit: "HOURS", ...input } })).createRule.id;
    rules.perUser = await create({ name: "per-user", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 12 });
    rules.perTenant = await create({ name: "per-tenant", scope: ["TENANT"], algorithm: "SLIDING_WINDOW_LOG", limit: 40 });
    rules.perIp = await create({ name: "per-ip", scope: ["IP"], algorithm: "TOKEN_BUCKET", limit: 20, burst: 20 });
    rules.shadow = await create({ name: "shadow", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 5, action: "LOG_ONLY" });
    // The other instances hear of the rules on the cluster's pub/sub.
    for (const client of clients) {
      for (let waited = 0; (await check(client, { userId: "u0", ip: "10.0.0.1", dryRun: true })).checkLimits.results.length < 4; waited += 10) {
        expect(waited, "a rule change did not reach every instance").toBeLessThan(5_000);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  });
  afterAll(async () => {
    await fleet?.stop();
    await cluster?.stop();
  });

  const check = (client: GraphQLClient, request: Omit<CheckLimitsInput, "tenantId">) => client.data(CheckTimedDocument, { request: { tenantId, resource: "/orders", method: "POST", ...request } });

  /** Users whose per-user bucket lives on another master than the tenant's bucket: every request spans nodes. */
  async function usersAcrossMasters(count: number): Promise<string[]> {
    const layout = new KeyLayout(prefix, loadSettings({}).redisPages);
    const masterOf = async (ruleId: string, key: string) => (await cluster.masterOf(layout.slotOf(ruleId, layout.field(key)))).port;
    const users: string[] = [];
    for (let i = 0; users.length < count; i++) {
      const { checkLimits } = await check(clients[0]!, { userId: `u${i}`, ip: "10.0.0.1", dryRun: true });
      const keyOf = (ruleId: string) => checkLimits.results.find((r) => r.rule.id === ruleId)!.key;
      if ((await masterOf(rules.perUser, keyOf(rules.perUser))) !== (await masterOf(rules.perTenant, keyOf(rules.perTenant)))) users.push(`u${i}`);
    }
    return users;
  }

  it("admit no more than any rule allows, and denied requests consume nothing, whatever slots the rules fall in", async () => {
    const users = await usersAcrossMasters(4);
    const ips = ["10.0.0.1", "10.0.0.2"];
    const pick = <T>(values: readonly T[]) => values[Math.floor(Math.random() * values.length)]!;
    const samples: Sample[] = [];
    let sent = 0;
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, caller) => {
        const client = clients[caller % clients.length]!;
        while (sent++ < REQUESTS) {
          const request = { userId: pick(users), ip: pick(ips), cost: 1 + Math.floor(Math.random() * 3) };
          const { checkLimits } = await check(client, request);
          samples.push({
            user: request.userId,
            ip: request.ip,
            cost: request.cost,
            allowed: checkLimits.allowed,
            degraded: checkLimits.degraded,
            atMs: Date.parse(checkLimits.decidedAt),
            conforming: new Map(checkLimits.results.map((r) => [r.rule.id, r.allowed])),
          });
        }
      }),
    );
    expect(samples.filter((s) => s.degraded)).toEqual([]);
    const admitted = samples.filter((s) => s.allowed);
    expect(admitted.length).toBeGreaterThan(0);
    expect(samples.length - admitted.length).toBeGreaterThan(0);

    const units = (of: readonly Sample[]) => of.reduce((sum, s) => sum + s.cost, 0);
    const currentHour = Math.floor(Date.now() / HOUR_MS);
    const inHour = (s: Sample, hour: number) => Math.floor(s.atMs / HOUR_MS) === hour;

    // No over-admission: each bucket's admitted units within its limit (per aligned hour for the fixed windows).
    for (const user of users) {
      for (const hour of new Set(admitted.map((s) => Math.floor(s.atMs / HOUR_MS)))) {
        expect(units(admitted.filter((s) => s.user === user && inHour(s, hour)))).toBeLessThanOrEqual(12);
      }
    }
    expect(units(admitted)).toBeLessThanOrEqual(40);
    for (const ip of ips) expect(units(admitted.filter((s) => s.ip === ip))).toBeLessThanOrEqual(20);

    // Exact consumption: what each bucket has left is its limit minus the admitted requests' units, nothing of the denied ones.
    const free = async (user: string, ip: string, ruleId: string) => {
      const { checkLimits } = await check(clients[1]!, { userId: user, ip, dryRun: true });
      const result = checkLimits.results.find((r) => r.rule.id === ruleId)!;
      return result.remaining + (checkLimits.allowed && result.allowed ? 1 : 0);
    };
    expect(await free(users[0]!, ips[0]!, rules.perTenant)).toBe(40 - units(admitted));
    for (const ip of ips) expect(await free(users[0]!, ip, rules.perIp)).toBe(20 - units(admitted.filter((s) => s.ip === ip)));
    for (const user of users) {
      const thisHour = admitted.filter((s) => s.user === user && inHour(s, currentHour));
      expect(await free(user, ips[0]!, rules.perUser)).toBe(12 - units(thisHour));
      // A shadow rule counts what it would have admitted, of the requests that were admitted.
      expect(await free(user, ips[0]!, rules.shadow)).toBe(Math.max(0, 5 - units(thisHour.filter((s) => s.conforming.get(rules.shadow)))));
    }
  });
});
