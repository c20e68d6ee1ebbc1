/** Who may call: tokens, API keys and their lifecycle, and the API's own limits. */

import { createClient } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import {
  ApiKeysDocument,
  CheckLimitsDocument,
  CreateApiKeyDocument,
  CreateRuleDocument,
  ListRulesDocument,
  RevokeApiKeyDocument,
  ThrottleEventsDocument,
} from "../generated/graphql.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { fragmentFanOut } from "../support/hostile-documents.js";
import { openSocket, subscribe } from "../support/subscriptions.js";

describe("authentication and API keys", () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp("embedded", { ADMIN_MUTATIONS_PER_MINUTE: "1000", MAX_QUERY_DEPTH: "6", MAX_QUERY_FIELDS: "60" });
  });
  afterAll(() => t.stop());

  const as = (token?: string) => new GraphQLClient(t.app.url, token);
  const codeOf = (response: { errors?: readonly { extensions?: Record<string, unknown> }[] }) => response.errors?.[0]?.extensions?.code;

  it("answers a request without a token, or with a wrong one, UNAUTHENTICATED with HTTP 401", async () => {
    for (const client of [as(), as("fg_not-a-real-key")]) {
      const response = await client.request(ListRulesDocument, {});
      expect(response.status).toBe(401);
      expect(codeOf(response)).toBe("UNAUTHENTICATED");
      expect(response.data).toBeFalsy();
    }
  });

  it("creates a key whose secret is shown once and works, and lists keys without secrets", async () => {
    const created = (await t.client.data(CreateApiKeyDocument, { input: { tenantId: "acme", role: "CHECKER", name: "edge" } })).createApiKey;
    expect(created.secret).toMatch(/^fg_[A-Za-z0-9_-]{43}$/);
    expect(created.apiKey).toMatchObject({ tenantId: "acme", role: "CHECKER", name: "edge", revokedAt: null });
    const decision = await as(created.secret).data(CheckLimitsDocument, { request: { tenantId: "acme", userId: "u1" } });
    expect(decision.checkLimits.allowed).toBe(true);
    const listed = await t.client.request(ApiKeysDocument, { tenantId: "acme" });
    expect(JSON.stringify(listed)).not.toContain(created.secret);
    expect(listed.data?.apiKeys.map((k) => k.id)).toContain(created.apiKey.id);
  });

  it("refuses a revoked key at once", async () => {
    const { createApiKey } = await t.client.data(CreateApiKeyDocument, { input: { tenantId: "acme", role: "VIEWER", name: "soon gone" } });
    expect((await as(createApiKey.secret).request(ListRulesDocument, { tenantId: "acme" })).errors).toBeUndefined();
    expect((await t.client.data(RevokeApiKeyDocument, { id: createApiKey.apiKey.id })).revokeApiKey).toBe(true);
    expect(codeOf(await as(createApiKey.secret).request(ListRulesDocument, { tenantId: "acme" }))).toBe("UNAUTHENTICATED");
    const [listed] = (await t.client.data(ApiKeysDocument, { tenantId: "acme" })).apiKeys.filter((k) => k.id === createApiKey.apiKey.id);
    expect(listed?.revokedAt).not.toBeNull();
  });

  it("keeps ADMIN keys to tenant * and other roles to one tenant", async () => {
    const admin = await t.client.request(CreateApiKeyDocument, { input: { tenantId: "acme", role: "ADMIN", name: "x" } });
    expect(codeOf(admin)).toBe("BAD_USER_INPUT");
    expect(admin.errors?.[0]?.message).toBe('input.tenantId must be "*" for an ADMIN key: ADMIN acts on every tenant');
    const checker = await t.client.request(CreateApiKeyDocument, { input: { tenantId: "*", role: "CHECKER", name: "x" } });
    expect(codeOf(checker)).toBe("BAD_USER_INPUT");
  });

  it("lets a TENANT_ADMIN manage its own tenant's keys and nothing above or beside it", async () => {
    const { createApiKey } = await t.client.data(CreateApiKeyDocument, { input: { tenantId: "acme", role: "TENANT_ADMIN", name: "ops" } });
    const tenantAdmin = as(createApiKey.secret);
    expect((await tenantAdmin.request(CreateApiKeyDocument, { input: { tenantId: "acme", role: "CHECKER", name: "edge 2" } })).errors).toBeUndefined();
    expect(codeOf(await tenantAdmin.request(CreateApiKeyDocument, { input: { tenantId: "*", role: "ADMIN", name: "escalate" } }))).toBe("FORBIDDEN");
    expect(codeOf(await tenantAdmin.request(CreateApiKeyDocument, { input: { tenantId: "globex", role: "CHECKER", name: "x" } }))).toBe("FORBIDDEN");
    expect(codeOf(await tenantAdmin.request(ApiKeysDocument, { tenantId: "globex" }))).toBe("FORBIDDEN");
    const own = await tenantAdmin.data(ApiKeysDocument, {});
    expect(own.apiKeys.every((k) => k.tenantId === "acme")).toBe(true);
  });

  it("authenticates WebSocket subscriptions in connection_init, closing a bad one with 4403", async () => {
    const closeCode = (authorization?: string) =>
      new Promise<number>((resolve) => {
        const client = createClient({
          url: t.app.url.replace("http", "ws"),
          webSocketImpl: WebSocket,
          retryAttempts: 0,
          connectionParams: authorization ? { authorization } : {},
          on: { closed: (event) => resolve((event as { code: number }).code) },
        });
        client.subscribe({ query: "subscription { ruleChanges { ruleId } }" }, { next: () => undefined, error: () => undefined, complete: () => undefined });
        setTimeout(() => void client.dispose(), 500);
      });
    expect(await closeCode()).toBe(4403);
    expect(await closeCode("Bearer wrong")).toBe(4403);
    expect(await closeCode(`Bearer ${t.adminToken}`)).toBe(1000);
  });

  it("refuses documents nested too deep or selecting too many fields, before running them", async () => {
    const deep = await t.client.raw({ query: "{ rules { id } checkLimits(request: { tenantId: \"a\" }) { results { rule { id name tenantId } } } }" });
    expect(codeOf(deep)).toBeUndefined();
    // Past MAX_QUERY_DEPTH (6) only introspection can nest in this schema, and it may go as deep as
    // graphql-js's standard query (15 levels): 7 levels are answered, 16 refused.
    const introspection = (levels: number) => `{ a: checkLimits(request: { tenantId: "a" }) { rule { id } results { rule { id } } } __schema { types { fields { type { ${"ofType { ".repeat(levels - 5)}name${" }".repeat(levels - 5)} } } } } }`;
    expect(codeOf(await t.client.raw({ query: introspection(7) }))).toBeUndefined();
    const tooDeep = await t.client.raw({ query: introspection(16) });
    expect(codeOf(tooDeep)).toBe("GRAPHQL_VALIDATION_FAILED");
    expect(tooDeep.errors?.[0]?.message).toMatch(/the introspection is more than 15 levels deep; at most 15 are allowed/);
    const aliases = Array.from({ length: 21 }, (_, i) => `c${i}: checkLimits(request: { tenantId: "a" }) { allowed remaining }`).join(" ");
    const tooMany = await t.client.raw({ query: `{ ${aliases} }` });
    expect(codeOf(tooMany)).toBe("GRAPHQL_VALIDATION_FAILED");
    expect(tooMany.errors?.[0]?.message).toBe("the query selects more than 60 fields in all; at most 60 are allowed (use checkLimitsBatch for many checks)");
  });

  it("refuses a kilobyte of fragments that expands to 2 × 10^11 fields (12 levels spreading the next 10 times), and stays responsive", async () => {
    const fanOut = await t.client.raw({ query: fragmentFanOut(12) });
    expect(fanOut.status).toBe(400);
    expect(codeOf(fanOut)).toBe("GRAPHQL_VALIDATION_FAILED");
    expect(fanOut.errors?.[0]?.message).toBe("the query selects more than 60 fields in all; at most 60 are allowed (use checkLimitsBatch for many checks)");
    expect((await fetch(new URL("/healthz", t.app.url))).status).toBe(200);
  });

  it("parses no document past 10 tokens per allowed field (600) on any path: a check, a subscription sent over HTTP, one over graphql-ws", async () => {
    const tooLong = "Syntax Error: Document contains more that 600 tokens. Parsing aborted.";
    const check = await t.client.raw({ query: `{ checkLimits(request: { tenantId: "a" }) { ${"allowed ".repeat(600)}} }` });
    expect(check.errors?.map((e) => [e.message, e.extensions?.code])).toEqual([[tooLong, "GRAPHQL_PARSE_FAILED"]]);
    const subscription = `subscription { ruleChanges { ${"ruleId ".repeat(600)}} }`;
    const overHttp = await t.client.raw({ query: subscription });
    expect(overHttp.errors?.map((e) => [e.message, e.extensions?.code])).toEqual([[tooLong, "GRAPHQL_PARSE_FAILED"]]);
    const socket = openSocket(t.app.url, t.adminToken);
    const overWebSocket = await socket.subscribe(subscription).ended();
    await socket.close();
    expect(overWebSocket).toEqual([
      { message: tooLong, locations: [{ line: 1, column: 4202 }], extensions: { code: "GRAPHQL_PARSE_FAILED" } },
    ]);
  });
});

describe("Floodgate's own limit on admin mutations", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp("embedded", { ADMIN_MUTATIONS_PER_MINUTE: "3" });
  });
  afterAll(() => t.stop());

  it("refuses a key's changes beyond its limit with TOO_MANY_REQUESTS and a retryAfter, changing nothing", async () => {
    const codes = [];
    for (let i = 0; i < 4; i++) {
      const response = await t.client.request(CreateRuleDocument, { input: { tenantId: "limited", name: `r${i}`, limit: 1, window: 1 } });
      codes.push(response.errors?.[0]?.extensions?.code ?? "ok");
      if (i === 3) expect(response.errors?.[0]?.extensions?.retryAfter).toBeGreaterThan(0);
    }
    expect(codes).toEqual(["ok", "ok", "ok", "TOO_MANY_REQUESTS"]);
    expect((await t.client.data(ListRulesDocument, { tenantId: "limited" })).rules).toHaveLength(3);
    const check = await t.client.request(CheckLimitsDocument, { request: { tenantId: "limited" } });
    expect(check.errors).toBeUndefined();
  });
});

describe("events of Floodgate's own admin limit", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp("embedded", { ADMIN_MUTATIONS_PER_MINUTE: "5", EVENT_INTERVAL_MS: "10" });
  });
  afterAll(() => t.stop());

  it('reach no subscriber: a VIEWER of a tenant named "floodgate" sees nothing of another key hitting the admin limit', async () => {
    const key = async (tenantId: string, role: "VIEWER" | "TENANT_ADMIN") =>
      (await t.client.data(CreateApiKeyDocument, { input: { tenantId, role, name: `${role} of ${tenantId}` } })).createApiKey.secret;
    const viewer = await key("floodgate", "VIEWER");
    const otherAdmin = new GraphQLClient(t.app.url, await key("acme", "TENANT_ADMIN"));
    const own = (await t.client.data(CreateRuleDocument, { input: { tenantId: "floodgate", name: "own", scope: ["USER"], limit: 1, window: 60 } })).createRule;
    const deny = async (userId: string) => {
      for (let i = 0; i < 2; i++) await t.client.data(CheckLimitsDocument, { request: { tenantId: "floodgate", userId } });
    };

    const events = subscribe(t.app.url, ThrottleEventsDocument, {}, viewer);
    try {
      await events.ready(
        (attempt) => deny(`probe-${attempt}`),
        (e) => e.throttleEvents.key.startsWith("user:probe-"),
      );
      const codes = [];
      for (let i = 0; i < 6; i++) {
        const response = await otherAdmin.request(CreateRuleDocument, { input: { tenantId: "acme", name: `r${i}`, limit: 1, window: 1 } });
        codes.push(response.errors?.[0]?.extensions?.code ?? "ok");
      }
      expect(codes).toEqual(["ok", "ok", "ok", "ok", "ok", "TOO_MANY_REQUESTS"]);
      await deny("after");
      const seen = await events.until((received) => received.some((e) => e.throttleEvents.key === "user:after"));
      expect(seen.map((e) => [e.throttleEvents.tenantId, e.throttleEvents.ruleId])).toEqual(seen.map(() => ["floodgate", own.id]));
    } finally {
      await events.close();
    }
  });
});
