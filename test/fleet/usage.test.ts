/**
 * Usage across a fleet: two instances on one Postgres and one Redis prefix
 * each count their own checks and flush them to Redis, and either one reads
 * the sum, the buckets refused on the other, and both instances alive.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { HealthDocument, RuleUsageDocument, TopBucketsDocument } from "../generated/graphql.js";
import { check, createRule, newTenant, realStorageAvailable } from "../support/api.js";
import { startTestApps } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";

const FLUSH_MS = 100;

describe.runIf(await realStorageAvailable())("usage over two instances", () => {
  let stopFleet: () => Promise<void>;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    const fleet = await startTestApps(2, { USAGE_FLUSH_MS: String(FLUSH_MS) });
    [a, b] = fleet.apps as [TestApp, TestApp];
    stopFleet = fleet.stop;
  });
  afterAll(() => stopFleet?.());

  it("sums both instances' counts, ranks buckets refused on either, and counts both instances alive", async () => {
    const tenantId = newTenant();
    const rule = await createRule(a.client, { tenantId, name: "per-user", scope: ["USER"], limit: 3, window: 1, windowUnit: "MINUTES" });
    for (const instance of [a, b, a, b, b]) await check(instance.client, { tenantId, userId: "u1" });

    for (const reader of [a, b]) {
      await vi.waitFor(
        async () => {
          const { ruleUsage } = await reader.client.data(RuleUsageDocument, { ruleId: rule.id });
          const sum = ruleUsage.reduce((s, p) => ({ allowed: s.allowed + p.allowed, refused: s.refused + p.refused }), { allowed: 0, refused: 0 });
          expect(sum).toEqual({ allowed: 3, refused: 2 });
        },
        { timeout: 5_000, interval: FLUSH_MS },
      );
      expect((await reader.client.data(TopBucketsDocument, { tenantId })).topBuckets).toEqual([{ tenantId, ruleId: rule.id, ruleName: "per-user", key: "user:u1", refusals: 2 }]);
      await vi.waitFor(async () => expect((await reader.client.data(HealthDocument, {})).health.instances).toBe(2), { timeout: 5_000, interval: FLUSH_MS });
    }
  });
});
