/**
 * The rule database goes away (a TCP proxy in front of the real Postgres is
 * cut): checks go on with the rules already loaded, rule changes fail with
 * SERVICE_UNAVAILABLE and change nothing, and the service reconnects by
 * itself. It even starts while the database is down, from the last-known-good
 * snapshot on disk, and says so in /readyz.
 */

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { CheckLimitsDocument, CreateRuleDocument, ListRulesDocument, UpdateRuleDocument } from "../generated/graphql.js";
import { testAdminToken } from "../support/app.js";
import { GraphQLClient } from "../support/graphql-client.js";
import { createTestDatabase, POSTGRES_URL, postgresAvailable } from "../support/services.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

describe.runIf(await postgresAvailable())("when Postgres is unreachable", () => {
  const adminToken = testAdminToken();
  let database: { url: string; drop(): Promise<void> };
  let proxy: TcpProxy;
  let dataDir: string;
  let proxiedUrl: string;
  const apps: App[] = [];

  const start = async () => {
    const app = await startApp(
      loadSettings({ ADMIN_TOKEN: adminToken, PORT: "0", HOST: "127.0.0.1", DATABASE_URL: proxiedUrl, DATA_DIR: dataDir, RULES_RETRY_MS: "50" }),
      { logger: pino({ level: "silent" }) },
    );
    apps.push(app);
    return { app, client: new GraphQLClient(app.url, adminToken) };
  };
  const stop = async (app: App) => {
    apps.splice(apps.indexOf(app), 1);
    await app.close();
  };
  const readiness = async (app: App) => (await fetch(app.url.replace("/graphql", "/readyz"))).json() as Promise<Record<string, any>>;
  const waitFor = async (condition: () => Promise<boolean>) => {
    for (let i = 0; i < 100 && !(await condition()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(await condition()).toBe(true);
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    const target = new URL(POSTGRES_URL);
    proxy = await startTcpProxy(target.hostname, Number(target.port));
    const url = new URL(database.url);
    url.port = String(proxy.port);
    proxiedUrl = url.toString();
    dataDir = mkdtempSync(join(tmpdir(), "floodgate-pgfail-"));
  });
  afterAll(async () => {
    for (const app of [...apps]) await app.close();
    await proxy.stop();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("keeps checking with the loaded rules, refuses rule changes with SERVICE_UNAVAILABLE, and recovers by itself", async () => {
    const { app, client } = await start();
    const tenantId = "pg-down";
    const created = await client.data(CreateRuleDocument, { input: { tenantId, name: "per-user", scope: ["USER"], limit: 2, window: 60 } });
    await proxy.stop();

    const checks = [];
    for (let i = 0; i < 3; i++) checks.push((await client.data(CheckLimitsDocument, { request: { tenantId, userId: "u1" } })).checkLimits.allowed);
    expect(checks).toEqual([true, true, false]);

    const refused = await client.request(CreateRuleDocument, { input: { tenantId, name: "another", limit: 1, window: 1 } });
    expect(refused.errors?.[0]?.extensions?.code).toBe("SERVICE_UNAVAILABLE");
    const update = await client.request(UpdateRuleDocument, { id: created.createRule.id, input: { limit: 100 } });
    expect(update.errors?.[0]?.extensions?.code).toBe("SERVICE_UNAVAILABLE");
    expect(JSON.stringify(update)).not.toMatch(/stacktrace|\n\s+at /);

    await proxy.start();
    const rules = (await client.data(ListRulesDocument, { tenantId })).rules;
    expect(rules.map((r) => [r.name, r.limit, r.version])).toEqual([["per-user", 2, 1]]);
    await client.data(CreateRuleDocument, { input: { tenantId, name: "after", limit: 1, window: 1 } });
    await stop(app);
  });

  it("starts from the last-known-good snapshot while the database is down, says so, and switches back when it returns", async () => {
    const first = await start();
    const tenantId = "pg-boot";
    await first.client.data(CreateRuleDocument, { input: { tenantId, name: "one-per-minute", scope: ["USER"], limit: 1, window: 60 } });
    await stop(first.app);

    await proxy.stop();
    const { app, client } = await start();
    expect(await readiness(app)).toMatchObject({ ready: true, rules: { source: "snapshot" } });
    const decisions = [];
    for (let i = 0; i < 2; i++) decisions.push((await client.data(CheckLimitsDocument, { request: { tenantId, userId: "u1" } })).checkLimits.allowed);
    expect(decisions).toEqual([true, false]);

    await proxy.start();
    await waitFor(async () => (await readiness(app)).rules.source === "database");
  });

  it("does not start from a snapshot another database's rules were saved in", async () => {
    const first = await start();
    await first.client.data(CreateRuleDocument, { input: { tenantId: "pg-other", name: "one-per-minute", limit: 1, window: 60 } });
    await stop(first.app);
    const path = join(dataDir, "rules-snapshot.json");
    const saved = JSON.parse(readFileSync(path, "utf8")) as { database: string; rules: unknown[] };
    const { hostname, port, pathname } = new URL(proxiedUrl);
    expect(saved.database).toBe(`${hostname}:${port}${pathname}`);
    expect(saved.rules.length).toBeGreaterThan(0);
    writeFileSync(path, JSON.stringify({ ...saved, database: "elsewhere:5432/scratch" }));

    await proxy.stop();
    await expect(start()).rejects.toThrow(/rule database is unreachable/);
    await proxy.start();
  });

  it("refuses to start with the database down and no snapshot, rather than decide with no rules", async () => {
    await proxy.stop();
    rmSync(join(dataDir, "rules-snapshot.json"), { force: true });
    await expect(start()).rejects.toThrow(/rule database is unreachable/);
    await proxy.start();
  });
});
