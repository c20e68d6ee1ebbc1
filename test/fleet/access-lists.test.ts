/**
 * Access lists on two instances sharing one Postgres and one Redis: an entry
 * added through either instance is enforced by the other within a second
 * (the measured times are printed), and one removed stops applying there.
 */

import { describe, expect, it } from "vitest";
import { AddListEntryDocument, CheckScreenedDocument, RemoveListEntryDocument, type CheckLimitsInput } from "../generated/graphql.js";
import { newTenant, realStorageAvailable, sleep } from "../support/api.js";
import { useTwoInstances } from "../support/fleet.js";
import type { TestApp } from "../harness/in-process-app.js";

const PROPAGATION_BOUND_MS = 1000;

describe.runIf(await realStorageAvailable())("access lists on two instances", () => {
  let a: TestApp;
  let b: TestApp;
  const measured = useTwoInstances((apps) => ([a, b] = apps));

  /** Polls `on` (dry runs) until the request's screening reason is `expected`; how long that took from `since`. */
  async function untilReason(on: TestApp, request: CheckLimitsInput, expected: string | null, since: number): Promise<number> {
    const deadline = since + 5 * PROPAGATION_BOUND_MS;
    for (;;) {
      const decision = (await on.client.data(CheckScreenedDocument, { request: { ...request, dryRun: true } })).checkLimits;
      if ((decision.reason?.code ?? null) === expected) return performance.now() - since;
      if (performance.now() > deadline) throw new Error(`reason not ${expected} within ${deadline - since} ms: ${JSON.stringify(decision)}`);
      await sleep(2);
    }
  }

  function record(what: string, ms: number): void {
    measured.push(`${what}: ${ms.toFixed(1)} ms`);
    expect(ms, what).toBeLessThan(PROPAGATION_BOUND_MS);
  }

  it("refuses on B, within 1 s, an IP deny-listed on A, and admits it on A once B removes the entry", async () => {
    const tenantId = newTenant();
    const request: CheckLimitsInput = { tenantId, ip: "2001:db8::7" };
    let sent = performance.now();
    const entry = (await a.client.data(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "IP", value: "2001:db8::/48" } })).addListEntry;
    record("entry added on A, refused on B", await untilReason(b, request, "DENY_LISTED", sent));
    sent = performance.now();
    await b.client.data(RemoveListEntryDocument, { id: entry.id });
    record("entry removed on B, admitted on A", await untilReason(a, request, null, sent));
  });
});
