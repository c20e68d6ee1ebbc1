/**
 * Leased budgets through the service (LEASE_HOT_CHECKS_PER_SECOND): two
 * instances on one Redis share a hot bucket, and together admit exactly what
 * its rule allows, no more, while most checks are admitted from leases
 * (floodgate_leased_units_total on /metrics) instead of a round trip each.
 * A bucket reset through one instance drops the other's lease: what it
 * admits afterwards is counted in the reset bucket.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResetLimitDocument } from "../generated/graphql.js";
import { check, createRule, newTenant, realStorageAvailable } from "../support/api.js";
import { startTestApps } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";

describe.runIf(await realStorageAvailable())("leased budgets on two instances", () => {
  let stopFleet: () => Promise<void>;
  let instances: TestApp[];

  beforeAll(async () => {
    // Leases outlive the reset's propagation by far, so that only the reset's event can end them.
    const fleet = await startTestApps(2, { LEASE_HOT_CHECKS_PER_SECOND: "10", LEASE_MS: "1000", LEASE_MAX_MS: "60000" });
    instances = fleet.apps;
    stopFleet = fleet.stop;
  });
  afterAll(() => stopFleet?.());

  async function leasedUnits(app: TestApp, use: "taken" | "admitted"): Promise<number> {
    const text = await (await fetch(new URL("/metrics", app.app.url), { headers: { authorization: `Bearer ${app.adminToken}` } })).text();
    return Number(new RegExp(`^floodgate_leased_units_total\\{use="${use}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  }

  /** `count` checks of the tenant's one bucket, in waves of 20 over both instances; how many each admitted. */
  async function hammer(tenantId: string, count: number): Promise<number> {
    let admitted = 0;
    for (let sent = 0; sent < count; sent += 20) {
      const wave = Array.from({ length: Math.min(20, count - sent) }, (_, i) => check(instances[(sent + i) % 2]!.client, { tenantId }));
      admitted += (await Promise.all(wave)).filter((d) => d.allowed).length;
    }
    return admitted;
  }

  it("admit exactly a token bucket's burst between them, most of it from leases", async () => {
    const tenantId = newTenant();
    // 300 tokens refilling one an hour: nothing refills while the test runs, so the bucket admits 300, whoever asks.
    await createRule(instances[0]!.client, { tenantId, name: "quota", scope: ["TENANT"], algorithm: "TOKEN_BUCKET", limit: 1, window: 1, windowUnit: "HOURS", burst: 300 });
    const before = await Promise.all(instances.map((app) => leasedUnits(app, "admitted")));
    expect(await hammer(tenantId, 600)).toBe(300);
    const fromLeases = (await Promise.all(instances.map((app) => leasedUnits(app, "admitted")))).reduce((sum, n, i) => sum + n - before[i]!, 0);
    expect(fromLeases).toBeGreaterThan(100);

  });

  it("drop their leases of a bucket reset through either: what they admit afterwards is counted in the reset bucket", async () => {
    const tenantId = newTenant();
    const rule = await createRule(instances[0]!.client, { tenantId, name: "quota", scope: ["TENANT"], algorithm: "TOKEN_BUCKET", limit: 1, window: 1, windowUnit: "HOURS", burst: 300 });
    // A third of the bucket used: both instances hold leases with units left, counted in Redis.
    expect(await hammer(tenantId, 100)).toBe(100);
    expect(await Promise.all(instances.map((app) => leasedUnits(app, "taken")))).not.toContain(0);
    await instances[0]!.client.data(ResetLimitDocument, { ruleId: rule.id, key: `tenant:${tenantId}` });
    // The reset's event reaches the other instance within milliseconds (test/fleet/two-instances measures it); a second is the bound there.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await hammer(tenantId, 600)).toBe(300);
  });
});
