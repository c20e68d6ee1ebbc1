/**
 * Two regions on this machine (test/harness/regions.ts): each its own
 * redis-server and two instances, one Postgres, and a TCP proxy between the
 * regions that the test cuts and heals. A GLOBAL rule's limit is held by
 * both together; while cut off each decides on its share, degraded; once
 * healed they converge on the same counts, nothing counted twice or lost.
 *
 * Nothing waits a fixed time for the regions to catch up: each step waits,
 * within a bound, for what it needs (a region's view of the other's counts,
 * the partition noticed), and the times measured are printed.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CheckLimitsInput } from "../generated/graphql.js";
import { check, createRule, newTenant } from "../support/api.js";
import { createTestDatabase, postgresAvailable, redisBinariesAvailable } from "../support/services.js";
import { startRegions, type Regions } from "../harness/regions.js";
import type { TestApp } from "../harness/in-process-app.js";

const SYNC_MS = 100;
/** Generous: a loaded machine may take this long for what takes milliseconds when quiet. */
const BOUND_MS = 20_000;
/**
 * A test's whole run: above one step's BOUND_MS, so that a step too slow
 * fails by its own name (the default 20 s cut a test short in its first
 * waits on a loaded machine, naming nothing).
 */
const TEST_MS = 120_000;

describe.runIf((await postgresAvailable()) && (await redisBinariesAvailable()))("two regions sharing GLOBAL limits", () => {
  let regions: Regions;
  let dropDatabase: () => Promise<void>;
  let eu: TestApp[];
  let us: TestApp[];
  const measured: string[] = [];

  beforeAll(async () => {
    const database = await createTestDatabase();
    dropDatabase = database.drop;
    regions = await startRegions({
      names: ["eu", "us"],
      instancesPerRegion: 2,
      databaseUrl: database.url,
      // A link unheard for 3 s is cut: long enough that a loaded machine's slow rounds are not taken for a partition.
      env: { REGION_SYNC_MS: String(SYNC_MS), REGION_PARTITION_AFTER_MS: "3000", RULE_RELOAD_MS: "1000" },
    });
    [eu, us] = regions.regions.map((r) => r.instances) as [TestApp[], TestApp[]];
  }, 120_000);

  afterAll(async () => {
    console.log(`regions: ${measured.join("; ")}`);
    await regions?.stop();
    await dropDatabase?.();
  });

  /** Polls `probe` until it holds; how long that took. */
  async function until(what: string, probe: () => Promise<boolean>): Promise<number> {
    const started = performance.now();
    while (!(await probe())) {
      if (performance.now() - started > BOUND_MS) throw new Error(`${what}: not within ${BOUND_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return performance.now() - started;
  }

  /** What a region says is left of the tenant's GLOBAL bucket, by a dry run (it counts nothing). */
  const left = async (instance: TestApp, tenantId: string) => (await check(instance.client, { tenantId, dryRun: true })).remaining;

  /** A GLOBAL fixed window of `limit` an hour for the tenant, known to every instance of both regions. */
  async function globalRule(tenantId: string, limit: number): Promise<void> {
    await createRule(eu[0]!.client, { tenantId, name: "global", scope: ["TENANT"], algorithm: "FIXED_WINDOW", limit, window: 1, windowUnit: "HOURS", reach: "GLOBAL" });
    // Rules reach the other region by RULE_RELOAD_MS from the shared database; and the regions' links are up once both have heard each other.
    let known = 0;
    let linked = 0;
    for (const instance of [...eu, ...us]) known += await until("the rule known everywhere", async () => (await check(instance.client, { tenantId, dryRun: true })).rule !== null);
    for (const instance of [...eu, ...us]) linked += await until("the regions linked", async () => !(await check(instance.client, { tenantId, dryRun: true })).degraded);
    measured.push(`a rule known everywhere in ${known.toFixed(0)} ms, the regions linked ${linked.toFixed(0)} ms after`);
  }

  /** `count` checks of the tenant on a region's instances, half on each; how many were admitted, and how many degraded. */
  async function wave(instances: TestApp[], tenantId: string, count: number): Promise<{ admitted: number; degraded: number }> {
    const request: CheckLimitsInput = { tenantId };
    const decisions = await Promise.all(Array.from({ length: count }, (_, i) => check(instances[i % instances.length]!.client, request)));
    return { admitted: decisions.filter((d) => d.allowed).length, degraded: decisions.filter((d) => d.degraded).length };
  }

  it("hold a GLOBAL limit together: each region counts the other's admissions, once they are shipped", async () => {
    const tenantId = newTenant();
    await globalRule(tenantId, 60);
    let admitted = 0;
    for (let round = 0; round < 8; round++) {
      const [here, there] = round % 2 === 0 ? [eu, us] : [us, eu];
      const waved = await wave(here, tenantId, 10);
      admitted += waved.admitted;
      // Before the other region acts, its view holds this one's counts: the limit is then held exactly.
      const expected = Math.max(0, 60 - admitted - 1);
      const shippedIn = await until(`the other region's view (round ${round}, wave ${JSON.stringify(waved)}, ${expected} left)`, async () => (await left(there[0]!, tenantId)) === expected);
      if (round === 0) measured.push(`counts seen in the other region ${shippedIn.toFixed(0)} ms after the wave`);
    }
    expect(admitted).toBe(60);
  }, TEST_MS);

  it("decide on their shares while cut off, degraded, and converge once healed: nothing counted twice, nothing lost", async () => {
    const tenantId = newTenant();
    await globalRule(tenantId, 40);
    expect((await wave(eu, tenantId, 6)).admitted).toBe(6);
    await until("the other region's view", async () => (await left(us[0]!, tenantId)) === 40 - 6 - 1);

    const cutAt = performance.now();
    await regions.cut();
    // Every instance notices on its own (each reads the heard marks on its own round), so the waves wait for all four.
    const noticed = await until("the partition noticed", async () => {
      for (const instance of [...eu, ...us]) if (!(await check(instance.client, { tenantId, dryRun: true })).degraded) return false;
      return true;
    });
    measured.push(`partition noticed ${noticed.toFixed(0)} ms after the cut`);
    // Cut off, each region takes its share of 40 (20) on its own counts: eu has 6 already, so 14 more; us 20.
    const [inEu, inUs] = [await wave(eu, tenantId, 30), await wave(us, tenantId, 30)];
    expect(inEu).toEqual({ admitted: 14, degraded: 30 });
    expect(inUs).toEqual({ admitted: 20, degraded: 30 });

    await regions.heal();
    const healedAt = performance.now();
    const converged = await until(
      "both regions agreeing",
      async () => (await left(eu[0]!, tenantId)) === 0 && (await left(us[0]!, tenantId)) === 0 && !(await check(eu[0]!.client, { tenantId, dryRun: true })).degraded,
    );
    measured.push(`converged ${converged.toFixed(0)} ms after healing (cut for ${(healedAt - cutAt).toFixed(0)} ms)`);
    // Together again, the 40 were all used: 6 + 14 + 20, none counted twice (each region's counts are its own), none lost (shipped once healed).
    expect((await wave(eu, tenantId, 5)).admitted + (await wave(us, tenantId, 5)).admitted).toBe(0);
  }, TEST_MS);
});
