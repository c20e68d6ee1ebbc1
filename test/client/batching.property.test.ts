/**
 * Property: any sequence of checks (random tenants, users, paths, costs, dry
 * runs, bad input, and timing) gets the same decisions from a real Floodgate
 * whether the client batches them or sends them one by one.
 *
 * What makes the comparison sound:
 *   - Both runs must meet the same counter states. Counting runs use tenants
 *     of their own, with the same rules (compared by name, their tenant in
 *     bucket keys mapped back), so each starts from fresh buckets. Dry runs
 *     change nothing, so both runs of a dry-run sequence check the same
 *     tenants after the same setup.
 *   - Checks that count must reach Floodgate in the sequence's order. The
 *     counting runs issue a wave of checks at once and wait for it before the
 *     next, so a wave of one tenant is one batch, which Floodgate applies in
 *     order; only the dry runs, where order cannot matter, are also split by
 *     a small batch.maxSize, delayed at random, and spread over batches in flight
 *     together.
 *   - Time must not move a decision: every rule has a one-day window and an
 *     algorithm whose counts do not change within a test (an exact log, a
 *     token bucket refilling one token in 8 hours), and the fields that tell
 *     time (decidedAt, resetAt, retry waits, the reset headers) are left out.
 *   - Nothing else answers for the counter store: the client's refusal cache
 *     is off and so is Floodgate's over-limit cache (it would answer a
 *     repeated refusal in one run that the other sends in the same batch as
 *     the first).
 */

import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FloodgateClient, type CheckRequest, type FloodgateDecision } from "floodgate/client";
import { ImportRulesDocument } from "../generated/graphql.js";
import { realStorageAvailable, STORAGES } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { patientClient } from "../support/floodgate-clients.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 12);
const LOGICAL_TENANTS = ["t0", "t1"] as const;

interface Check {
  tenant: (typeof LOGICAL_TENANTS)[number];
  user: string;
  resource: string;
  method: string;
  cost: number;
  dryRun: boolean;
  badIp: boolean;
}

const check: fc.Arbitrary<Check> = fc.record({
  tenant: fc.constantFrom(...LOGICAL_TENANTS),
  user: fc.constantFrom("u0", "u1", "u2"),
  resource: fc.constantFrom("/api/a", "/api/b?x=1", "/other"),
  method: fc.constantFrom("GET", "POST"),
  cost: fc.integer({ min: 1, max: 3 }),
  dryRun: fc.boolean(),
  badIp: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});

const waves = fc.array(fc.array(check, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 6 });

function rulesFile(tenants: Record<string, string>): string {
  const rules = Object.values(tenants).flatMap((tenantId) => [
    { tenantId, name: "per-user", scope: "[USER]", algorithm: "SLIDING_WINDOW_LOG", limit: 4, priority: 3 },
    { tenantId, name: "per-user-endpoint", scope: "[USER, ENDPOINT]", algorithm: "TOKEN_BUCKET", limit: 3, priority: 2, resource: "/api/**" },
    { tenantId, name: "shadow", scope: "[USER]", algorithm: "SLIDING_WINDOW_LOG", limit: 2, priority: 1, action: "LOG_ONLY" },
    { tenantId, name: "tenant-wide", scope: "[TENANT]", algorithm: "SLIDING_WINDOW_LOG", limit: 12, priority: 0, method: "POST" },
  ]);
  return [
    "rules:",
    ...rules.flatMap((r) => [
      `  - tenantId: ${JSON.stringify(r.tenantId)}`,
      `    name: ${r.name}`,
      `    scope: ${r.scope}`,
      `    algorithm: ${r.algorithm}`,
      `    limit: ${r.limit}`,
      // Distinct priorities: rules that tie otherwise are ordered by id, and the two runs' rules have different ids.
      `    priority: ${r.priority}`,
      "    window: 1",
      "    windowUnit: DAYS",
      ...(r.resource ? [`    resource: ${r.resource}`] : []),
      ...(r.action ? [`    action: ${r.action}`] : []),
      ...("method" in r ? [`    method: ${r.method}`] : []),
    ]),
  ].join("\n");
}

/** A run's own tenants, one per logical tenant, with the same rules. */
async function tenantsWithRules(t: TestApp): Promise<Record<string, string>> {
  const run = randomUUID().slice(0, 8);
  const tenants = Object.fromEntries(LOGICAL_TENANTS.map((logical) => [logical, `prop-${run}-${logical}`]));
  const { importRules } = await t.client.data(ImportRulesDocument, { yaml: rulesFile(tenants), dryRun: false });
  expect(importRules.invalid).toEqual([]);
  return tenants;
}

function requestOf(c: Check, tenants: Record<string, string>): CheckRequest {
  return { tenantId: tenants[c.tenant]!, userId: c.user, resource: c.resource, method: c.method, cost: c.cost, dryRun: c.dryRun, ip: c.badIp ? "not-an-ip" : "10.0.0.1" };
}

/** A decision (or failure) without what tells time, its tenant named logically. */
function projection(outcome: PromiseSettledResult<FloodgateDecision>, tenants: Record<string, string>) {
  if (outcome.status === "rejected") {
    const error = outcome.reason as { code?: string; field?: string };
    return { error: error.code, field: error.field };
  }
  const d = outcome.value;
  const logical = (key: string) => Object.entries(tenants).reduce((k, [name, real]) => k.replaceAll(real, name), key);
  return {
    allowed: d.allowed,
    degraded: d.degraded,
    source: d.source,
    rule: d.rule?.name ?? null,
    action: d.action,
    limit: d.limit,
    remaining: d.remaining,
    refused: d.retryAfter !== null,
    delayMs: d.delayMs,
    nearLimit: d.nearLimit,
    results: d.results.map((r) => ({
      rule: r.rule.name,
      key: logical(r.key),
      allowed: r.allowed,
      limit: r.limit,
      remaining: r.remaining,
      refused: r.retryAfter !== null,
      delayMs: r.delayMs,
      consulted: r.consulted,
      nearLimit: r.nearLimit,
    })),
    // A partition key is a hash of the bucket's key, which differs between the two runs as the tenants do: only its place is compared.
    headers: d.headers.map((h) =>
      ["X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy"].includes(h.name) ? `${h.name}: ${h.value.replace(/;pk=:[A-Za-z0-9+/]+=*:/g, ";pk")}` : h.name,
    ),
  };
}

async function oneByOne(client: FloodgateClient, requests: CheckRequest[]): Promise<PromiseSettledResult<FloodgateDecision>[]> {
  const outcomes: PromiseSettledResult<FloodgateDecision>[] = [];
  for (const request of requests) outcomes.push((await Promise.allSettled([client.check(request)]))[0]!);
  return outcomes;
}

const realAvailable = await realStorageAvailable();

for (const storage of STORAGES) {
  describe.runIf(storage === "embedded" || realAvailable)(`batched and one by one, the same decisions (${storage})`, () => {
    let t: TestApp;
    let batched: FloodgateClient;
    let single: FloodgateClient;

    beforeAll(async () => {
      t = await startTestApp(storage, { OVER_LIMIT_CACHE_SIZE: "0", ADMIN_MUTATIONS_PER_MINUTE: "100000" });
      single = patientClient(t.app.url, t.adminToken, { cache: false, batch: { maxSize: 1 } });
    });

    afterAll(async () => {
      await single?.close();
      await t?.stop();
    });

    it("for checks that count, sent in waves", async () => {
      await fc.assert(
        fc.asyncProperty(waves, fc.constantFrom(0, 2), async (sequence, maxWaitMs) => {
          batched = patientClient(t.app.url, t.adminToken, { cache: false, batch: { maxWaitMs } });
          try {
            const [forBatches, forSingles] = [await tenantsWithRules(t), await tenantsWithRules(t)];
            const together: PromiseSettledResult<FloodgateDecision>[] = [];
            for (const wave of sequence) together.push(...(await Promise.allSettled(wave.map((c) => batched.check(requestOf(c, forBatches))))));
            const alone = await oneByOne(single, sequence.flat().map((c) => requestOf(c, forSingles)));
            expect(together.map((o) => projection(o, forBatches))).toEqual(alone.map((o) => projection(o, forSingles)));
            expect(batched.stats().batches).toBeLessThanOrEqual(sequence.length * LOGICAL_TENANTS.length + sequence.flat().filter((c) => c.badIp).length * 2);
          } finally {
            await batched.close();
          }
        }),
        { numRuns: RUNS },
      );
    }, 300_000);

    it("for dry runs, in batches of any size sent together at any time", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(check, { minLength: 1, maxLength: 10 }),
          fc.array(check.map((c) => ({ ...c, dryRun: true })), { minLength: 1, maxLength: 30 }),
          fc.integer({ min: 1, max: 5 }),
          fc.constantFrom(0, 1, 3),
          fc.array(fc.constantFrom(0, 0, 1, 2), { minLength: 30, maxLength: 30 }),
          async (setup, dryRuns, maxSize, maxWaitMs, delays) => {
            batched = patientClient(t.app.url, t.adminToken, { cache: false, batch: { maxSize, maxWaitMs } });
            try {
              const tenants = await tenantsWithRules(t);
              await oneByOne(single, setup.map((c) => requestOf({ ...c, dryRun: false }, tenants)));
              const requests = dryRuns.map((c) => requestOf(c, tenants));
              const together = await Promise.allSettled(
                requests.map(async (request, i) => {
                  if (delays[i]! > 0) await new Promise((resolve) => setTimeout(resolve, delays[i]));
                  return batched.check(request);
                }),
              );
              const alone = await oneByOne(single, requests);
              expect(together.map((o) => projection(o, tenants))).toEqual(alone.map((o) => projection(o, tenants)));
            } finally {
              await batched.close();
            }
          },
        ),
        { numRuns: RUNS },
      );
    }, 300_000);
  });
}
