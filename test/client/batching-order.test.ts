/**
 * What the client's batching must keep whatever it does for speed: checkMany
 * decides as one by one, in order (its checks of a tenant travel together,
 * never split between requests Floodgate could apply the other way round,
 * and more than a batch's worth go one request after another, all under the
 * call's one deadline, and all decided when close() was called after it); a
 * check of the wrong types fails alone, at once, whether Floodgate is up or
 * down and whatever the failure mode.
 */

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { FloodgateClient, type FetchFunction, type FloodgateDecision } from "floodgate/client";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, patientClient, silentServer, until } from "../support/floodgate-clients.js";

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

  it("decides a checkMany of several requests by failure mode at its one deadline, not a deadline a request", async () => {
    const silent = await silentServer();
    try {
      const client = track(new FloodgateClient({ url: silent.url, token: "t", timeoutMs: 200, cache: false, batch: { maxSize: 10 } }));
      const started = performance.now();
      const decisions = await client.checkMany(Array.from({ length: 50 }, (_, i) => ({ tenantId: "acme", userId: `u${i}` })));
      const tookMs = performance.now() - started;
      expect(decisions.every((d) => d.degraded)).toBe(true);
      // Five requests one after another: each with a deadline of its own, the call took five deadlines (1 s).
      expect(tookMs).toBeLessThan(600);
    } finally {
      await silent.close();
    }
  });

  it("sends a check made while a later part of a checkMany is gathered on its own deadline, not the call's earlier one", async () => {
    const tenantId = newTenant();
    await perUser(tenantId, 1_000);
    let requests = 0;
    let another: Promise<FloodgateDecision> | undefined;
    let client: FloodgateClient | undefined;
    const firstStalls: FetchFunction = (input, init) => {
      if (++requests > 1) return fetch(input, init);
      // The checkMany's first request: Floodgate slow this once, given up at the deadline; another caller checks right after.
      return new Promise((_, reject) =>
        init?.signal?.addEventListener("abort", () => {
          setTimeout(() => (another = client!.check({ tenantId, userId: "another" })), 0);
          reject(new Error("aborted"));
        }),
      );
    };
    client = track(new FloodgateClient({ url: suite.t.app.url, token: await apiKey(suite.client, tenantId), timeoutMs: 300, failureMode: "CLOSED", cache: false, fetch: firstStalls, batch: { maxSize: 2, maxWaitMs: 50 } }));
    const many = await client.checkMany([0, 1, 2].map((i) => ({ tenantId, userId: `u${i}` })));
    // The call's deadline passed with its first request: all of it decided by failure mode, its second part never sent.
    expect(many.map((d) => d.source)).toEqual(["CLIENT_FAILURE_MODE", "CLIENT_FAILURE_MODE", "CLIENT_FAILURE_MODE"]);
    await until(() => another !== undefined, "the other caller's check");
    expect(await another!).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
  });

  it("decides a checkMany made before close() whole, its later requests sent as its first was", async () => {
    const tenantId = newTenant();
    await perUser(tenantId, 100);
    const counting = countingFetch();
    const client = new FloodgateClient({ url: suite.t.app.url, token: await apiKey(suite.client, tenantId), timeoutMs: 5_000, cache: false, fetch: counting.fetch, batch: { maxSize: 4 } });
    const many = client.checkMany(Array.from({ length: 10 }, (_, i) => ({ tenantId, userId: `u${i}` })));
    const closed = client.close();
    const decisions = await many;
    await closed;
    expect(decisions.map((d) => [d.allowed, d.source])).toEqual(Array.from({ length: 10 }, () => [true, "COUNTER_STORE"]));
    expect(counting.requests()).toBe(3);
    await expect(client.checkMany([{ tenantId, userId: "late" }])).rejects.toMatchObject({ code: "CLIENT_CLOSED" });
  });
});

/** Checks a JavaScript caller may make whose values are not of the schema's types, each with the field it names. */
const WRONG_TYPES: [string, Record<string, unknown>][] = [
  ["request.userId", { userId: 42 }],
  ["request.cost", { cost: 1.5 }],
  ["request.cost", { cost: 1n }],
  ["request.dryRun", { dryRun: "yes" }],
  ["request.ignorePathCase", { ignorePathCase: 1 }],
  ["request.attributes[0]", { attributes: [{ key: "plan" }] }],
];

describe("FloodgateClient, a check of the wrong types", () => {
  it.each(["OPEN", "LOCAL"] as const)("fails alone, naming its field, and the checks beside it are decided (Floodgate down, %s)", async (failureMode) => {
    const down = await silentServer();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const client = new FloodgateClient({ url: down.url, token: "t", timeoutMs: 200, cache: false, failureMode, fetch: globalThis.fetch });
      for (const [field, wrong] of WRONG_TYPES) {
        const bad = client.check({ tenantId: "acme", userId: "u1", ...wrong } as never);
        const good = client.check({ tenantId: "acme", userId: "u2" });
        const [many] = await Promise.allSettled([client.checkMany([{ tenantId: "acme", userId: "u3" }, { tenantId: "acme", ...wrong } as never])]);
        const outcome = await Promise.race([Promise.allSettled([bad, good]), new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 2_000))]);
        expect(outcome, field).not.toBe("hung");
        const [badOutcome, goodOutcome] = outcome as PromiseSettledResult<FloodgateDecision>[];
        expect(badOutcome, field).toMatchObject({ status: "rejected", reason: { code: "BAD_USER_INPUT", field } });
        expect(goodOutcome, field).toMatchObject({ status: "fulfilled", value: { degraded: true } });
        expect(many, field).toMatchObject({ status: "rejected", reason: { code: "BAD_USER_INPUT", field } });
      }
      await client.close();
      // Node ends a process on an unhandled rejection: LOCAL's limiter met a number where it reads a string.
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await down.close();
    }
  });
});

await describeOnEachStorage("FloodgateClient, a check of the wrong types, Floodgate up", (suite) => {
  it("fails alone without a request of its own, and the checks beside it are decided by Floodgate in one request", async () => {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 10, window: 1, windowUnit: "HOURS" });
    const counting = countingFetch();
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: counting.fetch }));
    const checks = WRONG_TYPES.map(([, wrong]) => client.check({ tenantId, userId: "u1", ...wrong } as never));
    const good = Array.from({ length: 4 }, () => client.check({ tenantId, userId: "u2" }));
    const outcomes = await Promise.allSettled(checks);
    outcomes.forEach((outcome, i) => expect(outcome).toMatchObject({ status: "rejected", reason: { code: "BAD_USER_INPUT", field: WRONG_TYPES[i]![0] } }));
    expect((await Promise.all(good)).map((d) => [d.allowed, d.source, d.remaining])).toEqual([
      [true, "COUNTER_STORE", 9],
      [true, "COUNTER_STORE", 8],
      [true, "COUNTER_STORE", 7],
      [true, "COUNTER_STORE", 6],
    ]);
    expect(counting.requests()).toBe(1);
    expect(client.stats().callerErrors).toBe(WRONG_TYPES.length);
  });
});
