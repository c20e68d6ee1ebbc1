/**
 * The rule database goes away (a TCP proxy in front of the real Postgres is
 * cut): checks go on with the rules already loaded, rule changes fail with
 * SERVICE_UNAVAILABLE and change nothing, and the service reconnects by
 * itself. It even starts while the database is down, from the last-known-good
 * snapshot on disk, and says so in /readyz. API keys known before the outage
 * keep working through it, after a restart too; revoked ones stay refused, and
 * access list entries and bans known before it stay enforced after a restart;
 * a key that cannot be verified is a 503 with Retry-After, never a 500.
 */

import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { print } from "graphql";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import {
  AddListEntryDocument,
  BanDocument,
  CheckLimitsDocument,
  CheckScreenedDocument,
  CreateApiKeyDocument,
  CreateRuleDocument,
  HealthDocument,
  ListRulesDocument,
  RevokeApiKeyDocument,
  ThrottleEventsDocument,
  UpdateRuleDocument,
  type CheckLimitsInput,
} from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { createTestDatabase, POSTGRES_URL, postgresAvailable } from "../support/services.js";
import { openSocket } from "../support/subscriptions.js";
import { startTcpProxy, type TcpProxy } from "../harness/tcp-proxy.js";
import { sleep } from "../support/api.js";

describe.runIf(await postgresAvailable())("when Postgres is unreachable", () => {
  const adminToken = testAdminToken();
  let database: { url: string; drop(): Promise<void> };
  let proxy: TcpProxy;
  let dataDir: string;
  let proxiedUrl: string;
  const apps: App[] = [];

  const start = async (env: Record<string, string> = {}) => {
    const app = await startApp(
      loadSettings({ ADMIN_TOKEN: adminToken, PORT: "0", HOST: "127.0.0.1", DATABASE_URL: proxiedUrl, DATA_DIR: dataDir, RULE_RETRY_MS: "50", ...env }),
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
    // What the dashboard's banner shows.
    expect((await client.data(HealthDocument, {})).health.rules.source).toBe("snapshot");
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

  /** An API key of the tenant, made as ADMIN through `client`. */
  async function createKey(client: GraphQLClient, tenantId: string, role: "CHECKER" | "VIEWER") {
    const { apiKey, secret } = (await client.data(CreateApiKeyDocument, { input: { tenantId, role, name: `${role} ${randomUUID()}` } })).createApiKey;
    return { id: apiKey.id, secret };
  }

  /** One check with the key: the HTTP status, the Retry-After header, the error code, and whether it was allowed. */
  async function checkAs(app: App, token: string, tenantId: string) {
    const response = await fetch(app.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: print(CheckLimitsDocument), variables: { request: { tenantId, userId: "u1" } } }),
    });
    const body = (await response.json()) as { data?: { checkLimits: { allowed: boolean } }; errors?: { message: string; extensions?: { code?: string } }[] };
    return { status: response.status, retryAfter: response.headers.get("retry-after"), code: body.errors?.[0]?.extensions?.code ?? null, allowed: body.data?.checkLimits.allowed ?? null };
  }

  /** Runs `during` with the database cut off, and lets it back whatever happens. */
  async function whileDown(during: () => Promise<void>): Promise<void> {
    await proxy.stop();
    try {
      await during();
    } finally {
      await proxy.start();
    }
  }

  const UNVERIFIABLE = { status: 503, retryAfter: "1", code: "SERVICE_UNAVAILABLE", allowed: null };
  const REFUSED = { status: 401, retryAfter: null, code: "UNAUTHENTICATED", allowed: null };
  const ALLOWED = { status: 200, retryAfter: null, code: null, allowed: true };

  it("keeps authenticating the API keys it knew before the outage, after their lookups expired too, refuses revoked ones with 401, and answers a key it cannot verify 503 with Retry-After (a WebSocket 1013)", async () => {
    const tenantId = "pg-keys";
    // Made before this instance starts: it knows them from its first load, and never looks `unused` up before the outage.
    const first = await start();
    await first.client.data(CreateRuleDocument, { input: { tenantId, name: "per-user", scope: ["USER"], limit: 1000, window: 60 } });
    const [used, unused, revoked] = [await createKey(first.client, tenantId, "CHECKER"), await createKey(first.client, tenantId, "CHECKER"), await createKey(first.client, tenantId, "CHECKER")];
    await first.client.data(RevokeApiKeyDocument, { id: revoked.id });
    await stop(first.app);

    const { app } = await start({ API_KEY_CACHE_MS: "100" });
    expect(await checkAs(app, used.secret, tenantId)).toEqual(ALLOWED);
    await whileDown(async () => {
      await sleep(300);
      expect(await checkAs(app, used.secret, tenantId), "a key looked up before the outage, its lookup expired").toEqual(ALLOWED);
      expect(await checkAs(app, unused.secret, tenantId), "a key known from the last load, never looked up").toEqual(ALLOWED);
      expect(await checkAs(app, revoked.secret, tenantId), "a key revoked before the outage").toEqual(REFUSED);
      expect(await checkAs(app, "fg_never-issued-by-anyone", tenantId), "a token it never knew").toEqual(UNVERIFIABLE);
      expect(await checkAs(app, adminToken, tenantId)).toEqual(ALLOWED);
      const unverifiable = openSocket(app.url, "fg_never-issued-by-anyone");
      expect(await unverifiable.closed, "WebSocket's Try Again Later, as HTTP's 503").toBe(1013);
      const known = openSocket(app.url, unused.secret);
      await known.connected;
      await known.close();
    });
    // The database is tried again a second after it failed at the latest.
    await expect.poll(() => checkAs(app, "fg_never-issued-by-anyone", tenantId), { timeout: 5000 }).toEqual(REFUSED);
    await stop(app);
  });

  it("starts from its snapshots while the database is down with the keys it knew: known keys check, revoked ones are refused, and the snapshot holds only the secrets' hashes, readable by the service alone", async () => {
    const tenantId = "pg-keys-boot";
    const first = await start();
    await first.client.data(CreateRuleDocument, { input: { tenantId, name: "per-user", scope: ["USER"], limit: 1000, window: 60 } });
    const [known, revoked] = [await createKey(first.client, tenantId, "CHECKER"), await createKey(first.client, tenantId, "CHECKER")];
    await first.client.data(RevokeApiKeyDocument, { id: revoked.id });
    await stop(first.app);

    const path = join(dataDir, "api-keys-snapshot.json");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const text = readFileSync(path, "utf8");
    expect(text).toContain(createHash("sha256").update(known.secret).digest("hex"));
    expect(text).not.toContain(known.secret);
    expect(text).not.toContain(revoked.secret);

    await whileDown(async () => {
      const { app } = await start();
      expect(await readiness(app)).toMatchObject({ ready: true, rules: { source: "snapshot" } });
      expect(await checkAs(app, known.secret, tenantId)).toEqual(ALLOWED);
      expect(await checkAs(app, revoked.secret, tenantId)).toEqual(REFUSED);
      expect(await checkAs(app, "fg_never-issued-by-anyone", tenantId)).toEqual(UNVERIFIABLE);
      await stop(app);
    });
  });

  it("starts from its snapshots while the database is down with the access list entries and bans it knew: they still refuse, counting nothing", async () => {
    const tenantId = "pg-screens-boot";
    const first = await start();
    await first.client.data(CreateRuleDocument, { input: { tenantId, name: "per-user", scope: ["USER"], limit: 1000, window: 60 } });
    await first.client.data(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "IP", value: "192.0.2.0/24", note: "scanner" } });
    await first.client.data(BanDocument, { input: { tenantId, dimension: "USER", value: "troll", durationSeconds: 3600 } });
    await stop(first.app);
    expect(statSync(join(dataDir, "access-lists-snapshot.json")).mode & 0o777).toBe(0o600);

    await whileDown(async () => {
      const { app, client } = await start();
      expect(await readiness(app)).toMatchObject({ ready: true, rules: { source: "snapshot" } });
      const decide = async (request: Omit<CheckLimitsInput, "tenantId">) => (await client.data(CheckScreenedDocument, { request: { tenantId, ...request } })).checkLimits;
      expect(await decide({ userId: "u1", ip: "192.0.2.77" })).toMatchObject({ allowed: false, source: "SCREENING", reason: { code: "DENY_LISTED" } });
      expect(await decide({ userId: "troll", ip: "198.51.100.1" })).toMatchObject({ allowed: false, source: "SCREENING", reason: { code: "BANNED" } });
      expect(await decide({ userId: "u1", ip: "198.51.100.1" })).toMatchObject({ allowed: true, source: "COUNTER_STORE", reason: null });
      await stop(app);
    });
  });

  it("keeps a known key's WebSocket open and delivering through the outage, though its key is looked up again every API_KEY_CACHE_MS", async () => {
    const tenantId = "pg-keys-socket";
    const { app, client } = await start({ API_KEY_CACHE_MS: "100" });
    await client.data(CreateRuleDocument, { input: { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 60 } });
    const viewer = await createKey(client, tenantId, "VIEWER");
    const ws = openSocket(app.url, viewer.secret);
    const throttles = ws.subscribe(print(ThrottleEventsDocument), { tenantId });
    const deny = async (userId: string) => {
      for (let i = 0; i < 2; i++) await client.data(CheckLimitsDocument, { request: { tenantId, userId } });
    };
    for (let attempt = 0; throttles.events.length === 0 && attempt < 50; attempt++) await deny(`probe-${attempt}`);
    expect(throttles.events.length).toBeGreaterThan(0);

    await whileDown(async () => {
      await sleep(500);
      await deny("during the outage");
      await expect.poll(() => JSON.stringify(throttles.events)).toContain("user:during the outage");
    });
    expect(throttles.errors).toBeNull();
    await ws.close();
    expect(await ws.closed).toBe(1000);
    await stop(app);
  });
});
