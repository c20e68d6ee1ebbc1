/**
 * What the hot path's shortcuts look like to a caller over HTTP: automatic
 * persisted queries (a client sends a query's sha256 instead of its text) and
 * the over-limit cache's decisions (source, consulted).
 */

import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckLimitsSourceDocument } from "../generated/graphql.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { STORAGES, createRule, newTenant, realStorageAvailable } from "../support/api.js";

const realAvailable = await realStorageAvailable();

const QUERY = "query Remaining($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed remaining } }";
const HASH = createHash("sha256").update(QUERY).digest("hex");
const PERSISTED = { persistedQuery: { version: 1, sha256Hash: HASH } };

for (const storage of STORAGES) {
  describe.runIf(storage === "embedded" || realAvailable)(`the hot path over HTTP (${storage})`, () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp(storage);
    });

    afterAll(async () => {
      await t?.stop();
    });

    describe("automatic persisted queries", () => {
      it("asks for the query when it does not know the hash, registers it with the query, then runs it from the hash alone", async () => {
        const tenantId = newTenant();
        await createRule(t.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
        const variables = { r: { tenantId, userId: "u1" } };

        const unknown = await t.client.raw({ variables, extensions: PERSISTED });
        expect(unknown.errors?.[0]?.extensions?.code).toBe("PERSISTED_QUERY_NOT_FOUND");

        const registered = await t.client.raw({ query: QUERY, variables, extensions: PERSISTED });
        expect(registered.errors).toBeUndefined();
        expect(registered.data).toEqual({ checkLimits: { allowed: true, remaining: 4 } });

        const byHash = await t.client.raw({ variables, extensions: PERSISTED });
        expect(byHash.errors).toBeUndefined();
        expect(byHash.data).toEqual({ checkLimits: { allowed: true, remaining: 3 } });
      });

      it("refuses a query whose hash does not match it, and counts nothing", async () => {
        const tenantId = newTenant();
        await createRule(t.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
        const variables = { r: { tenantId, userId: "u1" } };
        const wrongHash = { persistedQuery: { version: 1, sha256Hash: "0".repeat(64) } };
        const response = await t.client.raw({ query: QUERY, variables, extensions: wrongHash });
        expect(response.errors?.[0]?.message).toMatch(/provided sha does not match query/i);
        expect((await t.client.raw({ query: QUERY, variables })).data).toEqual({ checkLimits: { allowed: true, remaining: 4 } });
      });
    });

    describe("the over-limit cache", () => {
      it("answers a bucket already refused itself, saying so, and lists the rules it did not read", async () => {
        const tenantId = newTenant();
        const perUser = await createRule(t.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
        const perIp = await createRule(t.client, { tenantId, name: "per-ip", scope: ["IP"], limit: 100, window: 1, windowUnit: "HOURS" });
        const request = { tenantId, userId: "u1", ip: "10.0.0.1" };
        const decisions = [];
        for (let i = 0; i < 3; i++) decisions.push((await t.client.data(CheckLimitsSourceDocument, { request })).checkLimits);
        expect(decisions.map((d) => [d.allowed, d.source])).toEqual([
          [true, "COUNTER_STORE"],
          [false, "COUNTER_STORE"],
          [false, "OVER_LIMIT_CACHE"],
        ]);
        expect(decisions[2]!.retryAfter).toBeGreaterThan(0);
        // The cached refusal is the one the store made, read when it was: it says so.
        expect(decisions[2]!.results).toEqual([
          { rule: { id: perUser.id }, allowed: false, consulted: true, readAt: decisions[1]!.results[0]!.readAt },
          { rule: { id: perIp.id }, allowed: true, consulted: false, readAt: null },
        ]);
        // A dry run reads the store, cache or no cache: every bucket, as it is now.
        const dry = (await t.client.data(CheckLimitsSourceDocument, { request: { ...request, dryRun: true } })).checkLimits;
        expect(dry.source).toBe("COUNTER_STORE");
        expect(dry.results.map((r) => [r.allowed, r.consulted, r.readAt !== null])).toEqual([
          [false, true, true],
          [true, true, true],
        ]);
      });

      it("answers null for the source when no rule applies", async () => {
        const { checkLimits } = await t.client.data(CheckLimitsSourceDocument, { request: { tenantId: newTenant(), userId: "u1" } });
        expect(checkLimits).toMatchObject({ allowed: true, source: null, results: [] });
      });
    });
  });
}
