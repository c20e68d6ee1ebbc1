/**
 * ruleUsage, topBuckets and health through the API, on both storages: the
 * counts a check makes reach the charts within a few flushes, each key sees
 * only its tenant's traffic, and bad arguments are named.
 */

import { expect, it, vi } from "vitest";
import { GraphQLClient } from "../harness/graphql-client.js";
import { CreateApiKeyDocument, HealthDocument, RuleUsageDocument, TopBucketsDocument, type RuleUsageQuery } from "../generated/graphql.js";
import { check, createRule, describeOnEachStorage, expectBadUserInput, expectCode, newTenant, uniqueName } from "../support/api.js";

const FLUSH_MS = 100;

function total(points: RuleUsageQuery["ruleUsage"]) {
  return points.reduce((sum, p) => ({ allowed: sum.allowed + p.allowed, refused: sum.refused + p.refused, shadowRefused: sum.shadowRefused + p.shadowRefused }), {
    allowed: 0,
    refused: 0,
    shadowRefused: 0,
  });
}

await describeOnEachStorage(
  "usage",
  (suite) => {
    async function keyOf(tenantId: string, role: "VIEWER" | "CHECKER" | "TENANT_ADMIN"): Promise<GraphQLClient> {
      const { createApiKey } = await suite.client.data(CreateApiKeyDocument, { input: { tenantId, role, name: uniqueName(role) } });
      return new GraphQLClient(suite.t.app.url, createApiKey.secret);
    }

    it("counts each rule's allowed, refused and shadow-refused checks per minute, and the buckets refused most", async () => {
      const tenantId = newTenant();
      const enforcing = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 2, window: 1, windowUnit: "MINUTES" });
      const shadow = await createRule(suite.client, { tenantId, name: "shadow", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES", action: "LOG_ONLY" });
      for (let i = 0; i < 5; i++) await check(suite.client, { tenantId, userId: "u1" });
      await check(suite.client, { tenantId, userId: "u2", dryRun: true });

      await vi.waitFor(
        async () => {
          const { ruleUsage } = await suite.client.data(RuleUsageDocument, { ruleId: enforcing.id });
          expect(total(ruleUsage)).toEqual({ allowed: 2, refused: 3, shadowRefused: 0 });
        },
        { timeout: 5_000, interval: FLUSH_MS },
      );
      // The shadow rule admitted the first check and would have refused the second and third; the over-limit cache refused
      // the last two from memory, by the enforcing rule alone: the shadow rule had no verdict of its own in them, and counted nothing.
      const { ruleUsage: shadowUsage } = await suite.client.data(RuleUsageDocument, { ruleId: shadow.id });
      expect(total(shadowUsage)).toEqual({ allowed: 1, refused: 0, shadowRefused: 2 });
      expect(shadowUsage).toHaveLength(61);
      expect(new Date(shadowUsage.at(-1)!.at).getTime() % 60_000).toBe(0);

      const { topBuckets } = await suite.client.data(TopBucketsDocument, { tenantId });
      expect(topBuckets).toEqual([
        { tenantId, ruleId: enforcing.id, ruleName: "per-user", key: "user:u1", refusals: 3 },
        { tenantId, ruleId: shadow.id, ruleName: "shadow", key: "user:u1", refusals: 2 },
      ]);
      expect((await suite.client.data(TopBucketsDocument, { tenantId, limit: 1 })).topBuckets).toHaveLength(1);
    });

    it("sums steps of several minutes", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId, userId: "u1" });
      await vi.waitFor(
        async () => {
          const { ruleUsage } = await suite.client.data(RuleUsageDocument, { ruleId: rule.id, step: 3600, since: new Date(Date.now() - 3 * 3600_000).toISOString() });
          expect(ruleUsage.length === 3 || ruleUsage.length === 4).toBe(true);
          expect(ruleUsage.every((point) => new Date(point.at).getTime() % 3600_000 === 0)).toBe(true);
          expect(total(ruleUsage).allowed).toBe(1);
        },
        { timeout: 5_000, interval: FLUSH_MS },
      );
    });

    it("shows a key of a tenant only its tenant's requests, and nothing of another tenant", async () => {
      const [acme, globex] = [newTenant(), newTenant()];
      const star = await createRule(suite.client, { tenantId: "*", name: uniqueName("star"), scope: ["USER"], limit: 100, window: 1, windowUnit: "MINUTES" });
      const own = await createRule(suite.client, { tenantId: globex, name: "own", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId: acme, userId: "u1" });
      for (let i = 0; i < 3; i++) await check(suite.client, { tenantId: globex, userId: "u1" });
      const acmeViewer = await keyOf(acme, "VIEWER");

      await vi.waitFor(
        async () => {
          expect(total((await suite.client.data(RuleUsageDocument, { ruleId: star.id })).ruleUsage).allowed).toBeGreaterThanOrEqual(2);
          expect(total((await acmeViewer.data(RuleUsageDocument, { ruleId: star.id })).ruleUsage)).toEqual({ allowed: 1, refused: 0, shadowRefused: 0 });
        },
        { timeout: 5_000, interval: FLUSH_MS },
      );
      expectCode((await acmeViewer.request(RuleUsageDocument, { ruleId: own.id })).errors, "NOT_FOUND");
      expectCode((await acmeViewer.request(TopBucketsDocument, { tenantId: globex })).errors, "FORBIDDEN");
      expect((await acmeViewer.data(TopBucketsDocument, {})).topBuckets).toEqual([]);
      const checker = await keyOf(globex, "CHECKER");
      expectCode((await checker.request(RuleUsageDocument, { ruleId: own.id })).errors, "FORBIDDEN");
      expectCode((await checker.request(TopBucketsDocument, {})).errors, "FORBIDDEN");
    });

    it("names the argument it refuses", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
      expectBadUserInput((await suite.client.request(RuleUsageDocument, { ruleId: rule.id, step: 90 })).errors, "step");
      expectBadUserInput((await suite.client.request(RuleUsageDocument, { ruleId: rule.id, step: 7200 })).errors, "step");
      expectBadUserInput((await suite.client.request(RuleUsageDocument, { ruleId: rule.id, since: new Date(Date.now() - 7 * 3600_000).toISOString() })).errors, "since");
      expectBadUserInput((await suite.client.request(RuleUsageDocument, { ruleId: rule.id, since: new Date(Date.now() + 3600_000).toISOString() })).errors, "since");
      expectBadUserInput((await suite.client.request(TopBucketsDocument, { tenantId, limit: 0 })).errors, "limit");
      expectBadUserInput((await suite.client.request(RuleUsageDocument, { ruleId: "x".repeat(200) })).errors, "ruleId");
    });

    it("tells any key whether decisions are degraded, where the rules come from, and how many instances report", async () => {
      const viewer = await keyOf(newTenant(), "VIEWER");
      await vi.waitFor(
        async () => {
          const { health } = await viewer.data(HealthDocument, {});
          expect(health).toMatchObject({ degraded: false, rules: { source: "database" }, instances: 1 });
        },
        { timeout: 5_000, interval: FLUSH_MS },
      );
    });
  },
  { USAGE_FLUSH_MS: String(FLUSH_MS) },
);
