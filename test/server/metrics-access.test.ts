/**
 * Who may read /metrics, which names every tenant and rule id: on the API
 * port only an ADMIN key or METRICS_TOKEN; on METRICS_PORT anyone who can
 * reach that listener, and nothing else is served there.
 */

import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings, SettingsError } from "../../src/config/settings.js";
import { CheckLimitsDocument, CreateApiKeyDocument, CreateRuleDocument } from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";

describe("/metrics", () => {
  const adminToken = testAdminToken();
  const metricsToken = `metrics-${testAdminToken()}`;
  let app: App;
  let metricsUrl: string;
  let ruleId: string;
  const secrets: Record<string, string> = {};

  beforeAll(async () => {
    app = await startApp(
      loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ADMIN_TOKEN: adminToken, METRICS_TOKEN: metricsToken, METRICS_PORT: "0" }),
      { logger: pino({ level: "silent" }) },
    );
    metricsUrl = app.url.replace("/graphql", "/metrics");
    const admin = new GraphQLClient(app.url, adminToken);
    ruleId = (await admin.data(CreateRuleDocument, { input: { tenantId: "tenant-watched", name: "per-user", scope: ["USER"], limit: 5, window: 60 } })).createRule.id;
    await admin.data(CheckLimitsDocument, { request: { tenantId: "tenant-watched", userId: "u1" } });
    for (const role of ["TENANT_ADMIN", "CHECKER", "VIEWER"] as const) {
      secrets[role] = (await admin.data(CreateApiKeyDocument, { input: { tenantId: "tenant-watched", role, name: role } })).createApiKey.secret;
    }
  });
  afterAll(() => app.close());

  const scrape = (url: string, token?: string) => fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const decisionLine = () => `floodgate_rule_decisions_total{tenant="tenant-watched",rule="${ruleId}",outcome="allowed"} 1`;

  it("refuses a caller without a token on the API port: 401, UNAUTHENTICATED, and no tenant or rule id in the body", async () => {
    for (const token of [undefined, "not-a-key-at-all-0123456789"]) {
      const response = await scrape(metricsUrl, token);
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toMatch(/^Bearer /);
      const body = await response.text();
      expect(JSON.parse(body).errors[0].extensions.code).toBe("UNAUTHENTICATED");
      expect(body).not.toContain("tenant-watched");
      expect(body).not.toContain(ruleId);
      expect(body).not.toContain("floodgate_");
    }
  });

  it("refuses keys of one tenant, VIEWER included: 403, FORBIDDEN, nothing of the metrics", async () => {
    for (const role of ["TENANT_ADMIN", "CHECKER", "VIEWER"]) {
      const response = await scrape(metricsUrl, secrets[role]);
      expect(response.status, role).toBe(403);
      const body = await response.text();
      expect(JSON.parse(body).errors[0].extensions.code).toBe("FORBIDDEN");
      expect(body).not.toContain(ruleId);
    }
  });

  it("serves them to an ADMIN and to METRICS_TOKEN", async () => {
    for (const token of [adminToken, metricsToken]) {
      const response = await scrape(metricsUrl, token);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
      expect(await response.text()).toContain(decisionLine());
    }
  });

  it("lets METRICS_TOKEN open nothing but /metrics", async () => {
    const { status, errors } = await new GraphQLClient(app.url, metricsToken).raw({ query: "{ rules { id } }" });
    expect(status).toBe(401);
    expect(errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
  });

  it("serves them without a token on METRICS_PORT, and nothing else there", async () => {
    expect(app.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const response = await scrape(app.metricsUrl!);
    expect(response.status).toBe(200);
    expect(await response.text()).toContain(decisionLine());
    const elsewhere = await fetch(app.metricsUrl!.replace("/metrics", "/graphql"), { method: "POST" });
    expect(elsewhere.status).toBe(404);
  });
});

describe("metrics settings", () => {
  it("keep /metrics on the API port alone by default, and put a METRICS_PORT on loopback unless METRICS_HOST says otherwise", () => {
    expect(loadSettings({}).metricsListener).toBeNull();
    expect(loadSettings({ METRICS_PORT: "9464" }).metricsListener).toEqual({ port: 9464, host: "127.0.0.1" });
    expect(loadSettings({ METRICS_PORT: "9464", METRICS_HOST: "10.1.2.3" }).metricsListener).toEqual({ port: 9464, host: "10.1.2.3" });
  });

  const refused: [string, Record<string, string>, string][] = [
    ["a port out of range", { METRICS_PORT: "70000" }, 'METRICS_PORT must be an integer from 0 to 65535 (got "70000")'],
    ["the API port", { PORT: "4000", METRICS_PORT: "4000" }, "METRICS_PORT must differ from PORT (both 4000): metrics without a token are served on a listener of their own"],
    ["a host without a port", { METRICS_HOST: "0.0.0.0" }, "METRICS_HOST is set but METRICS_PORT is not"],
    ["a short token", { METRICS_TOKEN: "short" }, "METRICS_TOKEN must be at least 16 characters, without spaces"],
  ];
  for (const [what, env, message] of refused) {
    it(`refuse ${what}`, () => {
      expect(() => loadSettings(env)).toThrow(new SettingsError(message));
    });
  }
});
