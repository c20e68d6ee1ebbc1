/**
 * Redis dies under the service and comes back: every check is still answered,
 * each rule by its failureMode with `degraded: true`, and decisions return to
 * Redis by themselves once it is back.
 */

import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { CheckLimitsDocument, CreateRuleDocument, HealthDocument, ResetLimitDocument, TopBucketsDocument } from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { startOwnRedis, type OwnRedis } from "../harness/redis-server.js";

describe("when Redis dies under the service", () => {
  const adminToken = testAdminToken();
  let redis: OwnRedis;
  let app: App;
  let client: GraphQLClient;
  const ruleIds: Record<string, string> = {};

  beforeAll(async () => {
    redis = await startOwnRedis();
    app = await startApp(
      loadSettings({
        ADMIN_TOKEN: adminToken,
        PORT: "0",
        HOST: "127.0.0.1",
        DATA_DIR: "memory://",
        REDIS_URL: redis.url,
        REDIS_BREAKER_OPEN_MS: "100",
        INSTANCE_COUNT: "2",
      }),
      { logger: pino({ level: "silent" }) },
    );
    client = new GraphQLClient(app.url, adminToken);
    for (const failureMode of ["OPEN", "CLOSED", "LOCAL"] as const) {
      const { createRule } = await client.data(CreateRuleDocument, {
        input: { tenantId: `t-${failureMode}`, name: "per-user", scope: ["USER"], limit: 4, window: 60, failureMode },
      });
      ruleIds[failureMode] = createRule.id;
    }
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
  });

  const check = async (failureMode: string, userId = "u1") =>
    (await client.data(CheckLimitsDocument, { request: { tenantId: `t-${failureMode}`, userId } })).checkLimits;

  it("decides by each rule's failure mode while Redis is down, and returns to Redis when it is back", async () => {
    expect((await check("OPEN")).degraded).toBe(false);
    await redis.kill();

    const open = await check("OPEN");
    expect(open).toMatchObject({ allowed: true, degraded: true });

    const closed = await check("CLOSED");
    expect(closed).toMatchObject({ allowed: false, degraded: true });
    expect(closed.retryAfter).toBeGreaterThanOrEqual(1);
    expect(closed.headers.find((h) => h.name === "Retry-After")).toBeDefined();

    // LOCAL: limit 4 shared by 2 instances, so this one admits 2.
    const local = [];
    for (let i = 0; i < 3; i++) local.push((await check("LOCAL", "u-local")).allowed);
    expect(local).toEqual([true, true, false]);

    const reset = await client.request(ResetLimitDocument, { ruleId: ruleIds.OPEN!, key: "user:u1" });
    expect(reset.errors?.[0]?.extensions?.code).toBe("SERVICE_UNAVAILABLE");

    // What the dashboard's banner shows: the breaker is open, decisions are degraded.
    const { health: down } = await client.data(HealthDocument, {});
    expect(down.degraded).toBe(true);
    expect(down.breakers.map((b) => b.state)).not.toContain("closed");
    expect(down.instances).toBeNull();
    const usage = await client.request(TopBucketsDocument, { tenantId: "t-OPEN" });
    expect(usage.errors?.[0]).toMatchObject({ message: "usage cannot be read now: the counter store is unreachable", extensions: { code: "SERVICE_UNAVAILABLE" } });

    await redis.restart();
    let back = await check("CLOSED", "u-back");
    for (let i = 0; i < 60 && back.degraded; i++) {
      await new Promise((r) => setTimeout(r, 50));
      back = await check("CLOSED", "u-back");
    }
    expect(back).toMatchObject({ allowed: true, degraded: false });
    const { health: up } = await client.data(HealthDocument, {});
    expect(up).toMatchObject({ degraded: false, breakers: [{ state: "closed" }] });
  });
});
