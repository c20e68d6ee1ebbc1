/**
 * What the client's batching must keep whatever it does for speed: checkMany
 * decides as one by one, in order (its checks of a tenant travel together,
 * never split between requests Floodgate could apply the other way round,
 * and more than a batch's worth go one request after another); a check
 * waiting for its batch is decided by its deadline; a check that cannot be
 * written fails alone.
 */

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { FloodgateClient, type FetchFunction, type FloodgateDecision } from "floodgate/client";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, patientClient, silentServer } from "../support/floodgate-clients.js";

const { track } = closedAfterEachTest();

/** A fetch that counts the requests it carries and the most it had in flight at once. */
function countingFetch(): { fetch: FetchFunction; requests: () => number; mostInFlight: () => number } {
  let requests = 0;
  let inFlight = 0;
  let most = 0;
  return {
    fetch: async (input, init) => {
      requests++;
      most = Math.max(most, ++inFlight);
      try {
        return await fetch(input, init);
      } finally {
        inFlight--;
      }
    },
    requests: () => requests,
    mostInFlight: () => most,
  };
}

await describeOnEachStorage("FloodgateClient batching order", (suite) => {
  const perUser = (tenantId: string, limit: number) =>
    createRule(suite.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit, window: 1, windowUnit: "HOURS" });

  it("sends checkMany's checks in one request, in order, where checks made one by one at once are split by caller", async () => {
    const tenantId = newTenant();
    await perUser(tenantId, 1);
    // 16 checks (a batch that is split between two requests): u1 from one address first and another last, others between.
    const requests = [{ tenantId, userId: "u1", ip: "10.0.0.1" }, ...Array.from({ length: 14 }, (_, i) => ({ tenantId, userId: `other-${i}`, ip: "192.0.2.1" })), { tenantId, userId: "u1", ip: "10.0.0.2" }];
    const many = countingFetch();
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: many.fetch }));
    const decisions: FloodgateDecision[] = await client.checkMany(requests);
    expect(many.requests()).toBe(1);
    // As one by one: u1's first check takes its one unit, its second is refused.
    expect([decisions[0]!.allowed, decisions[15]!.allowed]).toEqual([true, false]);
    expect(decisions.slice(1, 15).every((d) => d.allowed)).toBe(true);

    const single = countingFetch();
    const another = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: single.fetch }));
    await Promise.all(requests.map((r) => another.check({ ...r, userId: `${r.userId}-again` })));
    expect(single.requests()).toBe(2);
  });

  it("sends more than batch.maxSize of checkMany's checks in requests one after another, decided in order", async () => {
    const tenantId = newTenant();
    await perUser(tenantId, 5);
    const counting = countingFetch();
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: counting.fetch, batch: { maxSize: 4 } }));
    const decisions = await client.checkMany(Array.from({ length: 10 }, () => ({ tenantId, userId: "u1" })));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false, false, false]);
    expect([counting.requests(), counting.mostInFlight()]).toEqual([3, 1]);
  });

  it("decides a check by its deadline when batch.maxWaitMs is longer than timeoutMs", async () => {
    const tenantId = newTenant();
    const client = track(new FloodgateClient({ url: suite.t.app.url, token: await apiKey(suite.client, tenantId), timeoutMs: 200, batch: { maxWaitMs: 30_000 }, cache: false }));
    let settled = false;
    const pending = client.check({ tenantId, userId: "u1" }).finally(() => (settled = true));
    // Far past the 200 ms deadline, far short of the 30 s wait: the call must have been decided (never held until the batch's timer).
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(settled).toBe(true);
    await pending;
  });
});

describe("FloodgateClient, a check that cannot be written", () => {
  it("fails alone, and the checks batched with it are still decided", async () => {
    const down = await silentServer();
    try {
      const client = new FloodgateClient({ url: down.url, token: "t", timeoutMs: 200, cache: false, fetch: globalThis.fetch });
      // A JavaScript caller's cost as a BigInt: JSON cannot write it, so the batch's body cannot be built.
      const bad = client.check({ tenantId: "acme", userId: "u1", cost: 1n as unknown as number });
      const good = client.check({ tenantId: "acme", userId: "u2" });
      const outcome = await Promise.race([Promise.allSettled([bad, good]), new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 2_000))]);
      expect(outcome).not.toBe("hung");
      const [badOutcome, goodOutcome] = outcome as PromiseSettledResult<FloodgateDecision>[];
      expect(badOutcome).toMatchObject({ status: "rejected", reason: { code: "BAD_USER_INPUT", field: "request" } });
      expect(goodOutcome).toMatchObject({ status: "fulfilled", value: { degraded: true } });
      await client.close();
    } finally {
      await down.close();
    }
  });
});
