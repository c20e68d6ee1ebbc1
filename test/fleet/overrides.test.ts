/**
 * Overrides on two instances sharing one Postgres and one Redis: one set,
 * changed or deleted through either instance is enforced by the other within
 * a second, and one that expires stops applying on both at its expiry time,
 * with no change made. Bounds are generous (1 s, the issue's); the measured
 * times are printed.
 */

import { describe, expect, it } from "vitest";
import { CheckWithOverrideDocument, DeleteOverrideDocument, SetOverrideDocument, type CheckLimitsInput } from "../generated/graphql.js";
import { createRule, newTenant, realStorageAvailable, sleep } from "../support/api.js";
import { useTwoInstances } from "../support/fleet.js";
import type { TestApp } from "../harness/in-process-app.js";

const PROPAGATION_BOUND_MS = 1000;

describe.runIf(await realStorageAvailable())("overrides on two instances", () => {
  let a: TestApp;
  let b: TestApp;
  const measured = useTwoInstances((apps) => ([a, b] = apps));

  /** The limit `on` gives the request's bucket, polled (dry runs) until `expected`; how long that took from `since`. */
  async function untilLimit(on: TestApp, request: CheckLimitsInput, expected: number, since: number): Promise<number> {
    const deadline = since + 5 * PROPAGATION_BOUND_MS;
    for (;;) {
      const decision = (await on.client.data(CheckWithOverrideDocument, { request: { ...request, dryRun: true } })).checkLimits;
      if (decision.limit === expected) return performance.now() - since;
      if (performance.now() > deadline) throw new Error(`limit not ${expected} within ${deadline - since} ms: ${JSON.stringify(decision)}`);
      await sleep(2);
    }
  }

  function record(what: string, ms: number): void {
    measured.push(`${what}: ${ms.toFixed(1)} ms`);
    expect(ms, what).toBeLessThan(PROPAGATION_BOUND_MS);
  }

  async function perCustomerRule() {
    const tenantId = newTenant();
    const rule = await createRule(a.client, { tenantId, name: "per customer", attributeKeys: ["customer"], limit: 2, window: 1, windowUnit: "HOURS" });
    const pro: CheckLimitsInput = { tenantId, attributes: [{ key: "customer", value: "pro-co" }] };
    await untilLimit(b, pro, 2, performance.now());
    return { rule, pro };
  }

  it("enforces on B, within 1 s, an override set on A, and forgets on A one deleted on B", async () => {
    const { rule, pro } = await perCustomerRule();
    let sent = performance.now();
    const override = (await a.client.data(SetOverrideDocument, { input: { ruleId: rule.id, attributeKey: "customer", identifier: "pro-co", limit: 20 } })).setOverride;
    record("override set on A, enforced on B", await untilLimit(b, pro, 20, sent));
    sent = performance.now();
    await b.client.data(SetOverrideDocument, { input: { ruleId: rule.id, attributeKey: "customer", identifier: "pro-co", limit: 30 } });
    record("override changed on B, enforced on A", await untilLimit(a, pro, 30, sent));
    sent = performance.now();
    await b.client.data(DeleteOverrideDocument, { id: override.id });
    record("override deleted on B, gone on A", await untilLimit(a, pro, 2, sent));
  });

  it("stops applying on both instances when it expires", async () => {
    const { rule, pro } = await perCustomerRule();
    const expiresAtMs = Date.now() + 2000;
    await a.client.data(SetOverrideDocument, { input: { ruleId: rule.id, attributeKey: "customer", identifier: "pro-co", limit: 20, expiresAt: new Date(expiresAtMs).toISOString() } });
    await untilLimit(b, pro, 20, performance.now());
    await sleep(Math.max(0, expiresAtMs - Date.now()));
    const at = performance.now();
    for (const [name, instance] of [["A", a], ["B", b]] as const) record(`override expired, gone on ${name}`, await untilLimit(instance, pro, 2, at));
  });
});
