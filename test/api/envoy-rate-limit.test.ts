/**
 * Envoy's rate limit service against a real Floodgate on Redis and Postgres,
 * driven by a gRPC client built from the .proto files: what Envoy sends
 * (several descriptors, hits_addend, built-in and custom entries) gets OK or
 * OVER_LIMIT with each descriptor's status and the headers, a refused request
 * consumes nothing from any descriptor, and what cannot be honoured is refused
 * naming the field.
 */

import { status, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateApiKeyDocument, SetOverrideDocument, ThrottleEventsDocument, type CreateRuleInput } from "../generated/graphql.js";
import { calendarPeriod } from "../../src/domain/calendar.js";
import { createRule, newTenant, realStorageAvailable, uniqueName } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { envoyClient, type DescriptorInput, type EnvoyClient, type RateLimitResponse } from "../support/envoy-client.js";
import { decodeMessage, encodeMessage, messagesOf, stringOf, varintOf } from "../support/protobuf-wire.js";
import { subscribe } from "../support/subscriptions.js";
import type { TestApp } from "../harness/in-process-app.js";

const tenant = newTenant();
/** GRPC_DOMAINS maps this Envoy domain to the tenant; any other domain is the tenant of its name. */
const DOMAIN = "edge";

let t: TestApp;
/** With the CHECKER key of `tenant`, whose domain is DOMAIN; each other case has a tenant (and domain) of its own, so that no case's rules apply to another's. */
let envoy: EnvoyClient;
/** With the ADMIN_TOKEN, which may check every tenant. */
let admin: EnvoyClient;
let checkerToken: string;

async function apiKey(tenantId: string, role: "CHECKER" | "VIEWER"): Promise<string> {
  return (await t.client.data(CreateApiKeyDocument, { input: { tenantId, role, name: uniqueName(role.toLowerCase()) } })).createApiKey.secret;
}

/** A rule of the tenant, limit per minute unless said otherwise. */
async function rule(tenantId: string, input: Partial<CreateRuleInput> & { limit: number }) {
  return createRule(t.client, { tenantId, name: uniqueName("rls"), window: 1, windowUnit: "MINUTES", ...input });
}

const ip = (address: string): DescriptorInput => ({ entries: [{ key: "remote_address", value: address }] });
const path = (resource: string): DescriptorInput => ({ entries: [{ key: "path", value: resource }] });
const header = (response: RateLimitResponse, name: string) => response.response_headers_to_add.find((h) => h.key.toLowerCase() === name.toLowerCase())?.value;

async function grpcError(call: Promise<unknown>): Promise<ServiceError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e as ServiceError,
  );
  expect(error, "expected the call to fail").not.toBeNull();
  return error!;
}

describe.runIf(await realStorageAvailable())("Envoy rate limit service over gRPC (real storage)", () => {
  beforeAll(async () => {
    t = await startTestApp("real", { GRPC_PORT: "0", GRPC_DOMAINS: `${DOMAIN}=${tenant}` });
    checkerToken = await apiKey(tenant, "CHECKER");
    envoy = envoyClient(t.app.grpcAddress!, checkerToken);
    admin = envoyClient(t.app.grpcAddress!, t.adminToken);
  });
  afterAll(async () => {
    envoy?.close();
    admin?.close();
    await t?.stop();
  });

  it("decides every descriptor of a request in one call: statuses in order, and a refusal consumes nothing from the others", async () => {
    const perIp = await rule(tenant, { scope: ["IP"], limit: 2 });
    await rule(tenant, { resource: "/api/search", limit: 5, name: "search" });
    const request = { domain: DOMAIN, descriptors: [ip("10.1.0.1"), path("/api/search")] };

    const first = await envoy.shouldRateLimit(request);
    expect(first.overall_code).toBe("OK");
    expect(first.statuses).toMatchObject([
      { code: "OK", current_limit: { name: perIp.name, requests_per_unit: 2, unit: "MINUTE" }, limit_remaining: 1 },
      { code: "OK", current_limit: { name: "search", requests_per_unit: 5, unit: "MINUTE" }, limit_remaining: 4 },
    ]);
    expect(Number(first.statuses[0]!.duration_until_reset!.seconds)).toBeGreaterThan(0);
    // Until the bucket is whole again: a sliding window counter forgets a unit within two windows.
    expect(Number(first.statuses[0]!.duration_until_reset!.seconds)).toBeLessThanOrEqual(120);
    await envoy.shouldRateLimit(request);

    const refused = await envoy.shouldRateLimit(request);
    expect(refused.overall_code).toBe("OVER_LIMIT");
    expect(refused.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ["OVER_LIMIT", 0],
      ["OK", 3],
    ]);
    expect(header(refused, "Retry-After")).toMatch(/^\d+$/);
    expect(header(refused, "RateLimit-Policy")).toContain(`q=2;w=60`);

    // The refused request took nothing from the search rule: 5 - 2 admitted - this one.
    const alone = await envoy.shouldRateLimit({ domain: DOMAIN, descriptors: [path("/api/search")] });
    expect(alone.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 2 });
    expect(header(alone, "RateLimit")).toMatch(/"search";r=2;t=\d+/);
  });

  it("counts a request once against a rule that applies to several of its descriptors", async () => {
    const shop = newTenant();
    const tenantWide = await rule(shop, { limit: 3 });
    const response = await admin.shouldRateLimit({ domain: shop, descriptors: [ip("10.8.0.1"), ip("10.8.0.2")] });
    expect(response.statuses).toMatchObject([
      { code: "OK", current_limit: { name: tenantWide.name }, limit_remaining: 2 },
      { code: "OK", current_limit: { name: tenantWide.name }, limit_remaining: 2 },
    ]);
  });

  it("adds the request's hits_addend to every descriptor (0 counts as 1), or the descriptors' own when they agree", async () => {
    const shop = newTenant();
    await rule(shop, { scope: ["USER"], limit: 10 });
    const user = (id: string): DescriptorInput => ({ entries: [{ key: "user_id", value: id }] });
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [user("u1")], hits_addend: 3 })).statuses[0]!.limit_remaining).toBe(7);
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [user("u1")], hits_addend: 0 })).statuses[0]!.limit_remaining).toBe(6);
    const own = await admin.shouldRateLimit({ domain: shop, descriptors: [{ ...user("u1"), hits_addend: { value: 4 } }], hits_addend: 1 });
    expect(own.statuses[0]!.limit_remaining).toBe(2);
    const tooMany = await admin.shouldRateLimit({ domain: shop, descriptors: [user("u1")], hits_addend: 3 });
    expect(tooMany.overall_code).toBe("OVER_LIMIT");
    expect(tooMany.statuses[0]!.limit_remaining).toBe(2);

    const differing = await grpcError(admin.shouldRateLimit({ domain: shop, descriptors: [{ ...user("u2"), hits_addend: { value: 2 } }, user("u3")], hits_addend: 5 }));
    expect(differing.code).toBe(status.INVALID_ARGUMENT);
    expect(differing.details).toBe("descriptors[1] adds 5 hits where another descriptor adds 2: the descriptors of one request are decided as one call of one cost");
  });

  it("maps generic_key, header_match and custom entries to attributes, which rules match with `when` and key their buckets by", async () => {
    const shop = newTenant();
    const checkout = await rule(shop, { when: [{ key: "generic_key", values: ["checkout"] }], limit: 1 });
    const mobile = await rule(shop, { when: [{ key: "header_match", values: ["mobile"] }], limit: 5 });
    const freePlan = await rule(shop, { when: [{ key: "plan", values: ["free"] }], attributeKeys: ["region"], limit: 1 });
    const entries = (...pairs: [string, string][]): DescriptorInput => ({ entries: pairs.map(([key, value]) => ({ key, value })) });

    const first = await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["generic_key", "checkout"]), entries(["header_match", "mobile"])] });
    expect(first.statuses).toMatchObject([
      { code: "OK", current_limit: { name: checkout.name }, limit_remaining: 0 },
      { code: "OK", current_limit: { name: mobile.name }, limit_remaining: 4 },
    ]);
    const second = await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["generic_key", "checkout"]), entries(["header_match", "mobile"])] });
    expect(second.overall_code).toBe("OVER_LIMIT");
    expect(second.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ["OVER_LIMIT", 0],
      ["OK", 4],
    ]);

    // One bucket per region for the free plan; another plan is no business of that rule.
    const eu = await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "free"], ["region", "eu"])] });
    expect(eu.statuses[0]).toMatchObject({ code: "OK", current_limit: { name: freePlan.name }, limit_remaining: 0 });
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "free"], ["region", "eu"])] })).overall_code).toBe("OVER_LIMIT");
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "free"], ["region", "us"])] })).statuses[0]).toMatchObject({ code: "OK", limit_remaining: 0 });
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "pro"], ["region", "eu"])] })).statuses[0]).toMatchObject({ code: "OK", current_limit: null });
    // A free-plan descriptor without its region carries no bucket key of the rule: the rule does not apply.
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "free"])] })).statuses[0]).toMatchObject({ code: "OK", current_limit: null });

    const badKey = await grpcError(admin.shouldRateLimit({ domain: shop, descriptors: [entries(["plan", "free"], ["x plan", "free"])] }));
    expect(badKey.code).toBe(status.INVALID_ARGUMENT);
    expect(badKey.details).toBe('descriptors[0].entries[1].key must be letters, digits, "_", "-" and "." only (got "x plan")');
  });

  it("answers a calendar rule's period as its unit, and the period's end as the reset", async () => {
    const shop = newTenant();
    const calendar = { period: "MONTH", timeZone: "Europe/Berlin" } as const;
    const monthly = await rule(shop, { scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 1000, calendar });
    const checkedAt = Date.now();
    const response = await admin.shouldRateLimit({ domain: shop, descriptors: [{ entries: [{ key: "user_id", value: "u1" }] }] });
    expect(response.statuses[0]).toMatchObject({ code: "OK", current_limit: { name: monthly.name, requests_per_unit: 1000, unit: "MONTH" }, limit_remaining: 999 });
    const untilEnd = (calendarPeriod(checkedAt, { ...calendar, weekStartsOn: null }).endMs - checkedAt) / 1000;
    expect(Math.abs(Number(response.statuses[0]!.duration_until_reset!.seconds) - untilEnd)).toBeLessThanOrEqual(5);
  });

  it("answers an override's limit and window for the bucket it names, and the rule's for the others", async () => {
    const shop = newTenant();
    const perUser = await rule(shop, { scope: ["USER"], limit: 1 });
    await t.client.data(SetOverrideDocument, { input: { ruleId: perUser.id, dimension: "USER", identifier: "vip", limit: 100, window: 1, windowUnit: "HOURS" } });
    const user = (id: string): DescriptorInput => ({ entries: [{ key: "user_id", value: id }] });
    // The instance that set the override applies it before answering the mutation.
    const vip = await admin.shouldRateLimit({ domain: shop, descriptors: [user("vip")] });
    expect(vip.statuses[0]).toMatchObject({ code: "OK", current_limit: { name: perUser.name, requests_per_unit: 100, unit: "HOUR" } });
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [user("someone")] })).statuses[0]).toMatchObject({
      current_limit: { requests_per_unit: 1, unit: "MINUTE" },
      limit_remaining: 0,
    });
  });

  it("maps the domain: through GRPC_DOMAINS, else to the tenant of the same name", async () => {
    const other = newTenant();
    await createRule(t.client, { tenantId: other, name: "per-ip", scope: ["IP"], limit: 1, window: 1, windowUnit: "MINUTES" });
    expect((await admin.shouldRateLimit({ domain: other, descriptors: [ip("10.2.0.1")] })).statuses[0]).toMatchObject({ current_limit: { name: "per-ip" } });
    expect((await admin.shouldRateLimit({ domain: other, descriptors: [ip("10.2.0.1")] })).overall_code).toBe("OVER_LIMIT");
    // The tenant's CHECKER cannot check another tenant's domain.
    const forbidden = await grpcError(envoy.shouldRateLimit({ domain: other, descriptors: [ip("10.2.0.1")] }));
    expect(forbidden.code).toBe(status.PERMISSION_DENIED);
  });

  it("answers a descriptor no rule applies to OK without a limit", async () => {
    const shop = newTenant();
    const response = await admin.shouldRateLimit({ domain: shop, descriptors: [{ entries: [{ key: "method", value: "OPTIONS" }] }] });
    expect(response.overall_code).toBe("OK");
    expect(response.statuses).toEqual([{ code: "OK", current_limit: null, limit_remaining: 0, duration_until_reset: null }]);
    expect(response.response_headers_to_add).toEqual([]);
  });

  it("skips CONCURRENCY rules, whose leases Envoy could never release: their descriptors answer OK without a limit", async () => {
    const shop = newTenant();
    await rule(shop, { scope: ["IP"], algorithm: "CONCURRENCY", limit: 1 });
    for (let i = 0; i < 3; i++) {
      const response = await admin.shouldRateLimit({ domain: shop, descriptors: [ip("10.9.9.9")] });
      expect(response.overall_code).toBe("OK");
      expect(response.statuses).toEqual([{ code: "OK", current_limit: null, limit_remaining: 0, duration_until_reset: null }]);
    }
  });

  it("answers LOG_ONLY's would-be refusals OK and publishes them as shadow throttle events", async () => {
    const shop = newTenant();
    const shadow = await rule(shop, { scope: ["IP"], resource: "/shadow", limit: 1, action: "LOG_ONLY" });
    const request = { domain: shop, descriptors: [{ entries: [{ key: "remote_address", value: "10.3.0.1" }, { key: "path", value: "/shadow" }] }] };
    const events = subscribe(t.app.url, ThrottleEventsDocument, { tenantId: shop, ruleId: shadow.id }, t.adminToken);
    try {
      await events.ready(
        async () => {
          const response = await admin.shouldRateLimit(request);
          expect(response.overall_code).toBe("OK");
          expect(response.statuses[0]!.code).toBe("OK");
        },
        (event) => event.throttleEvents.ruleId === shadow.id,
      );
      const [event] = await events.until((received) => received.length > 0);
      expect(event!.throttleEvents).toMatchObject({ tenantId: shop, action: "LOG_ONLY", shadow: true, key: "ip:10.3.0.1", resource: "/shadow" });
    } finally {
      await events.close();
    }
  });

  it("admits a THROTTLE rule's delayed request OK, telling the backend the delay in a request header", async () => {
    const shop = newTenant();
    // A fixed window's line is the next window: the second request waits for it.
    await rule(shop, { scope: ["IP"], resource: "/slow", limit: 1, action: "THROTTLE", algorithm: "FIXED_WINDOW" });
    const request = { domain: shop, descriptors: [{ entries: [{ key: "remote_address", value: "10.4.0.1" }, { key: "path", value: "/slow" }] }] };
    expect((await admin.shouldRateLimit(request)).request_headers_to_add).toEqual([]);
    const delayed = await admin.shouldRateLimit(request);
    expect(delayed.overall_code).toBe("OK");
    expect(delayed.request_headers_to_add).toHaveLength(1);
    expect(delayed.request_headers_to_add[0]!.key).toBe("x-floodgate-delay-ms");
    expect(Number(delayed.request_headers_to_add[0]!.value)).toBeGreaterThan(0);
  });

  it("refuses what it cannot honour, naming the field, and counts nothing", async () => {
    const shop = newTenant();
    await rule(shop, { scope: ["IP"], resource: "/strict", limit: 1 });
    const strict = (address: string): DescriptorInput => ({ entries: [{ key: "remote_address", value: address }, { key: "path", value: "/strict" }] });
    const cases: [DescriptorInput[], string][] = [
      [[strict("10.5.0.1"), { ...path("/strict"), limit: { requests_per_unit: 10, unit: "MINUTE" } }], "descriptors[1].limit is not supported: a descriptor's own limit cannot replace Floodgate's rules; set the limit as a rule (docs/envoy.md)"],
      [[strict("10.5.0.1"), { entries: [] }], "descriptors[1].entries must hold at least one entry"],
      [[strict("10.5.0.1"), strict("not-an-ip")], 'descriptors[1].ip must be an IPv4 or IPv6 address (got "not-an-ip")'],
      [[{ entries: [{ key: "remote_address", value: "10.5.0.1" }, { key: "remote_address", value: "10.5.0.2" }] }], 'descriptors[0].entries[1].key names "remote_address" a second time in this descriptor'],
      [[], "descriptors must hold at least one descriptor"],
      [[{ entries: Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, value: "v" })) }], "descriptors[0].entries must hold at most 32 entries (got 33)"],
    ];
    for (const [descriptors, message] of cases) {
      const error = await grpcError(admin.shouldRateLimit({ domain: shop, descriptors }));
      expect(error.code).toBe(status.INVALID_ARGUMENT);
      expect(error.details).toBe(message);
    }
    expect((await admin.shouldRateLimit({ domain: shop, descriptors: [strict("10.5.0.1")] })).statuses[0]).toMatchObject({ code: "OK", limit_remaining: 0 });
  });

  it("authenticates the bearer key of the call's metadata: CHECKER suffices, VIEWER and no key are refused", async () => {
    const request = { domain: DOMAIN, descriptors: [ip("10.6.0.1")] };
    expect((await grpcError(envoy.shouldRateLimit(request, { token: null }))).code).toBe(status.UNAUTHENTICATED);
    expect((await grpcError(envoy.shouldRateLimit(request, { token: "not-a-key-of-anyone" }))).code).toBe(status.UNAUTHENTICATED);
    const viewer = await grpcError(envoy.shouldRateLimit(request, { token: await apiKey(tenant, "VIEWER") }));
    expect(viewer.code).toBe(status.PERMISSION_DENIED);
    expect(viewer.details).toBe("this API key's role VIEWER does not allow checkLimits");
    expect((await envoy.shouldRateLimit(request)).overall_code).toBe("OK");
  });

  it("serves grpc.health.v1 and counts every call by method and code at /metrics", async () => {
    expect(await envoy.health("")).toEqual({ status: "SERVING" });
    expect(await envoy.health("envoy.service.ratelimit.v3.RateLimitService")).toEqual({ status: "SERVING" });
    expect((await grpcError(envoy.health("elsewhere"))).code).toBe(status.NOT_FOUND);
    expect(await envoy.watchHealth("")).toEqual({ status: "SERVING" });
    // MAX_BODY_BYTES (1 MiB by default) bounds a message before it is decoded.
    const huge = await grpcError(envoy.shouldRateLimit({ domain: DOMAIN, descriptors: [{ entries: [{ key: "plan", value: "x".repeat(2 << 20) }] }] }));
    expect(huge.code).toBe(status.RESOURCE_EXHAUSTED);
    const metrics = await (await fetch(t.app.url.replace("/graphql", "/metrics"), { headers: { authorization: `Bearer ${t.adminToken}` } })).text();
    expect(metrics).toMatch(/floodgate_grpc_calls_total\{method="envoy\.service\.ratelimit\.v3\.RateLimitService\/ShouldRateLimit",code="OK"\} [1-9]/);
    expect(metrics).toMatch(/floodgate_grpc_calls_total\{method="envoy\.service\.ratelimit\.v3\.RateLimitService\/ShouldRateLimit",code="INVALID_ARGUMENT"\} [1-9]/);
    expect(metrics).toMatch(/floodgate_grpc_calls_total\{method="grpc\.health\.v1\.Health\/Check",code="NOT_FOUND"\} 1/);
    expect(metrics).toMatch(/floodgate_grpc_call_duration_seconds_count\{method="envoy\.service\.ratelimit\.v3\.RateLimitService\/ShouldRateLimit"\} [1-9]/);
  });

  it("speaks the published wire format: a request encoded by field number alone gets an answer read by field number alone", async () => {
    const shop = newTenant();
    const perIp = await rule(shop, { scope: ["IP"], limit: 2, window: 1, windowUnit: "HOURS" });
    // RateLimitRequest: domain = 1, descriptors = 2, hits_addend = 3. RateLimitDescriptor: entries = 1 (Entry: key = 1,
    // value = 2), hits_addend = 3 (google.protobuf.UInt64Value: value = 1).
    const request = encodeMessage([
      [1, shop],
      [2, encodeMessage([[1, encodeMessage([[1, "remote_address"], [2, "10.7.0.1"]])], [3, encodeMessage([[1, 2]])]])],
      [3, 0],
    ]);
    // RateLimitResponse: overall_code = 1 (OK 1, OVER_LIMIT 2), statuses = 2, response_headers_to_add = 3 (HeaderValue:
    // key = 1, value = 2). DescriptorStatus: code = 1, current_limit = 2 (RateLimit: requests_per_unit = 1, unit = 2 with
    // HOUR 3, name = 3), limit_remaining = 3, duration_until_reset = 4 (google.protobuf.Duration: seconds = 1).
    const admitted = decodeMessage(await admin.raw(request, t.adminToken));
    expect(varintOf(admitted, 1)).toBe(1n);
    const [status] = messagesOf(admitted, 2);
    expect(varintOf(status!, 1)).toBe(1n);
    const [limit] = messagesOf(status!, 2);
    expect([varintOf(limit!, 1), varintOf(limit!, 2), stringOf(limit!, 3)]).toEqual([2n, 3n, perIp.name]);
    expect(varintOf(status!, 3)).toBe(0n);
    const [untilReset] = messagesOf(status!, 4);
    expect(varintOf(untilReset!, 1)).toBeGreaterThan(0n);
    const headers = new Map(messagesOf(admitted, 3).map((h) => [stringOf(h, 1), stringOf(h, 2)]));
    expect(headers.get("RateLimit-Policy")).toContain(`"${perIp.name}";q=2;w=3600`);

    const refused = decodeMessage(await admin.raw(request, t.adminToken));
    expect(varintOf(refused, 1)).toBe(2n);
    expect(varintOf(messagesOf(refused, 2)[0]!, 1)).toBe(2n);
  });
});
