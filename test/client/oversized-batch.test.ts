/**
 * A batch refused for its body's size: over Floodgate's MAX_BODY_BYTES
 * (Floodgate's 413), or over a proxy's limit in front of it (the proxy's own
 * 413 page). The client sends each half again on its own, down to halves that
 * fit, instead of every check alone or deciding them by failure mode, and
 * every check is decided once, as if alone.
 */

import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FloodgateClient } from "floodgate/client";
import { createRule, newTenant } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { apiKey, closedAfterEachTest, patientClient } from "../support/floodgate-clients.js";

const { track } = closedAfterEachTest();
const CHECKS = 64;

describe("a batch over Floodgate's MAX_BODY_BYTES", () => {
  let t: TestApp;
  beforeAll(async () => {
    // Room for about 20 of these checks in one request (the client's query text included).
    t = await startTestApp("embedded", { MAX_BODY_BYTES: "4096" });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("is sent again in halves until they fit, not one check at a time, each check decided once", async () => {
    const tenantId = newTenant();
    await createRule(t.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    const client: FloodgateClient = track(patientClient(t.app.url, await apiKey(t.client, tenantId), { cache: false }));
    // A first check teaches the client the tenant's rules, so that the batch below goes as one request.
    expect((await client.check({ tenantId, userId: "warm-up" })).allowed).toBe(true);
    const before = client.stats().batches;
    const requests = Array.from({ length: CHECKS }, (_, i) => ({ tenantId, userId: `user-${String(i).padStart(4, "0")}`, resource: "/api/orders/some/long/enough/path", method: "POST" }));
    const decisions = await client.checkMany([...requests, requests[0]!]);
    // Each user's first check takes its one unit; the repeat of user 0 at the end is refused: decided once each, in order.
    expect(decisions.slice(0, CHECKS).every((d) => d.allowed && d.source === "COUNTER_STORE")).toBe(true);
    expect(decisions[CHECKS]).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
    const sent = client.stats().batches - before;
    // 65 checks: the whole and its halves refused, its quarters decided (7 requests here); eighths at most (15), where one check at a time took 66.
    expect(sent).toBeGreaterThan(1);
    expect(sent).toBeLessThanOrEqual(15);
    expect(client.stats().callerErrors).toBe(0);
  });

  it("fails a check too large even alone with Floodgate's error, and decides the others", async () => {
    const tenantId = newTenant();
    await createRule(t.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    const client: FloodgateClient = track(patientClient(t.app.url, await apiKey(t.client, tenantId), { cache: false }));
    expect((await client.check({ tenantId, userId: "warm-up" })).allowed).toBe(true);
    // A cookie RFC 6265's browsers must hold (Floodgate takes up to 4,096 bytes), in a body over this Floodgate's 4,096.
    const huge = { tenantId, userId: "huge", cookie: `session=${"x".repeat(4000)}` };
    const outcomes = await Promise.allSettled([client.check({ tenantId, userId: "a" }), client.check(huge), client.check({ tenantId, userId: "b" })]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "BAD_REQUEST" });
    expect(outcomes.filter((o) => o.status === "fulfilled").every((o) => (o as PromiseFulfilledResult<{ allowed: boolean }>).value.allowed)).toBe(true);
    expect(client.stats().callerErrors).toBe(1);
  });
});

describe("a batch over the body limit of a proxy in front of Floodgate (its own HTML 413)", () => {
  let t: TestApp;
  let proxy: Server;
  let proxyUrl: string;
  beforeAll(async () => {
    t = await startTestApp("embedded");
    // As nginx with client_max_body_size 4k: its own page for a larger body, anything else passed on.
    proxy = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = Buffer.concat(chunks);
        if (body.length > 4096) {
          response.writeHead(413, { "content-type": "text/html" }).end("<html><body><h1>413 Request Entity Too Large</h1></body></html>");
          return;
        }
        const headers = { "content-type": String(request.headers["content-type"]), authorization: String(request.headers.authorization) };
        void fetch(t.app.url, { method: "POST", headers, body }).then(async (answer) => {
          response.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" }).end(await answer.text());
        });
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
  });
  afterAll(async () => {
    await new Promise((resolve) => proxy?.close(resolve));
    await t?.stop();
  });

  it("is halved as for Floodgate's own 413, not decided by failure mode: every check decided once, a check too large alone failing", async () => {
    const tenantId = newTenant();
    await createRule(t.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    const client: FloodgateClient = track(patientClient(proxyUrl, await apiKey(t.client, tenantId), { cache: false }));
    expect((await client.check({ tenantId, userId: "warm-up" })).allowed).toBe(true);
    const requests = Array.from({ length: CHECKS }, (_, i) => ({ tenantId, userId: `user-${String(i).padStart(4, "0")}`, resource: "/api/orders/some/long/enough/path", method: "POST" }));
    const decisions = await client.checkMany([...requests, requests[0]!]);
    expect(decisions.slice(0, CHECKS).every((d) => d.allowed && d.source === "COUNTER_STORE")).toBe(true);
    expect(decisions[CHECKS]).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
    expect(client.stats().decisions.failureMode).toBe(0);
    const huge = client.check({ tenantId, userId: "huge", cookie: `session=${"x".repeat(4000)}` });
    await expect(huge).rejects.toMatchObject({ code: "BAD_REQUEST", message: expect.stringContaining("413") });
  });
});
