/** What operators see: Prometheus metrics, request ids, and structured logs that never carry secrets. */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { CheckLimitsDocument, CreateApiKeyDocument, CreateRuleDocument } from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { capturedLog } from "../support/captured-log.js";

describe("operations", () => {
  const adminToken = testAdminToken();
  const { logger, lines } = capturedLog();
  let app: App;
  let client: GraphQLClient;
  let origin: string;

  beforeAll(async () => {
    app = await startApp(loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ADMIN_TOKEN: adminToken }), {
      logger,
    });
    client = new GraphQLClient(app.url, adminToken);
    origin = new URL(app.url).origin;
  });
  afterAll(() => app.close());

  it("serves Prometheus metrics: rule verdicts by tenant, rule and outcome, check latency, rule count", async () => {
    const { createRule } = await client.data(CreateRuleDocument, { input: { tenantId: "metrics", name: "one", scope: ["USER"], limit: 1, window: 60 } });
    for (let i = 0; i < 3; i++) await client.data(CheckLimitsDocument, { request: { tenantId: "metrics", userId: "u1" } });
    const response = await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } });
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(text).toContain(`floodgate_rule_decisions_total{tenant="metrics",rule="${createRule.id}",outcome="allowed"} 1`);
    expect(text).toContain(`floodgate_rule_decisions_total{tenant="metrics",rule="${createRule.id}",outcome="denied"} 2`);
    expect(text).toMatch(/floodgate_check_duration_seconds_count \d+/);
    expect(text).toMatch(/floodgate_rules [1-9]/);
    expect(text).toMatch(/floodgate_rules_load_age_seconds \d/);
    expect(text).not.toContain("u1");
  });

  it("counts verdicts across scrapes: each scrape shows every verdict so far, never one twice", async () => {
    const { createRule } = await client.data(CreateRuleDocument, { input: { tenantId: "metrics-scrapes", name: "two", scope: ["USER"], limit: 2, window: 60 } });
    const scrape = async () => (await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })).text();
    const series = (outcome: string) => `floodgate_rule_decisions_total{tenant="metrics-scrapes",rule="${createRule.id}",outcome="${outcome}"}`;
    await client.data(CheckLimitsDocument, { request: { tenantId: "metrics-scrapes", userId: "u1" } });
    expect(await scrape()).toContain(`${series("allowed")} 1`);
    expect(await scrape()).toContain(`${series("allowed")} 1`);
    for (let i = 0; i < 3; i++) await client.data(CheckLimitsDocument, { request: { tenantId: "metrics-scrapes", userId: "u1" } });
    const text = await scrape();
    expect(text).toContain(`${series("allowed")} 2`);
    expect(text).toContain(`${series("denied")} 2`);
  });

  it("echoes a sane X-Request-Id and makes one up otherwise", async () => {
    const echoed = await fetch(app.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${adminToken}`, "x-request-id": "trace-42" },
      body: JSON.stringify({ query: "{ rules { id } }" }),
    });
    expect(echoed.headers.get("x-request-id")).toBe("trace-42");
    const madeUp = await fetch(app.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${adminToken}`, "x-request-id": "bad id\twith junk" },
      body: JSON.stringify({ query: "{ rules { id } }" }),
    });
    expect(madeUp.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("logs one JSON line per mutation with its request id and key, and never a secret", async () => {
    const { createApiKey } = await client.data(CreateApiKeyDocument, { input: { tenantId: "metrics", role: "CHECKER", name: "edge" } });
    const audit = lines.filter((l) => l.msg === "mutation");
    expect(audit.length).toBeGreaterThanOrEqual(2);
    expect(audit.at(-1)).toMatchObject({ keyId: "bootstrap", operation: "CreateApiKey", failed: false });
    expect(typeof audit.at(-1)!.requestId).toBe("string");
    const everything = JSON.stringify(lines);
    expect(everything).not.toContain(createApiKey.secret);
    expect(everything).not.toContain(adminToken);
  });
});
