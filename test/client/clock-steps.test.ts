/**
 * The refusal cache when this machine's clock is stepped back (NTP
 * correcting a clock that ran fast, a VM resumed from a snapshot). A refusal
 * Floodgate gave for 2 s must not be served for an hour more, nor say to
 * retry in an hour: the cache only ever refuses what Floodgate would refuse.
 */

import { randomUUID } from "node:crypto";
import { afterEach, expect, it, vi } from "vitest";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, patientClient, silentServer, untilCacheLive } from "../support/floodgate-clients.js";

const { track, cleanups } = closedAfterEachTest();

afterEach(() => {
  vi.restoreAllMocks();
});

const HOUR_MS = 3_600_000;

await describeOnEachStorage("FloodgateClient, a clock stepped back", (suite) => {
  it("counts a remembered refusal down by the time that passed, not by the wall clock: stepped back an hour, it still ends when Floodgate's does", async () => {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 1, window: 2, windowUnit: "SECONDS" });
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
    await untilCacheLive(client);
    const request = { tenantId, userId: "u1" };
    // The refusal lands early enough in its 2 s window to be remembered for a while.
    let refusal;
    for (;;) {
      if ((await client.check(request)).allowed) {
        refusal = await client.check(request);
        if (refusal.source === "COUNTER_STORE" && refusal.retryAfter === 2) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect((await client.check(request)).source).toBe("CLIENT_REFUSAL_CACHE");

    const realNow = Date.now.bind(Date);
    vi.spyOn(Date, "now").mockImplementation(() => realNow() - HOUR_MS);
    const stepped = await client.check(request);
    if (stepped.source === "CLIENT_REFUSAL_CACHE") {
      expect(stepped.retryAfter).toBeLessThanOrEqual(refusal.retryAfter!);
      expect(Number(stepped.headers.find((h) => h.name === "Retry-After")?.value)).toBeLessThanOrEqual(refusal.retryAfter!);
    }
    // Floodgate's wait is over: the cache has nothing more to say.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect((await client.check(request)).source).not.toBe("CLIENT_REFUSAL_CACHE");
  }, 30_000);
});

it("keeps a check's deadline when the wall clock is stepped back while the check waits to be sent", async () => {
  const silent = await silentServer();
  cleanups.push(() => silent.close());
  const client = track(patientClient(silent.url, "any-token", { cache: false, timeoutMs: 300, failureMode: "CLOSED" }));
  const checking = client.check({ tenantId: "acme", userId: "u1" });
  // Stepped back before the batch goes out (the turn after): its deadline must not move an hour away.
  const realNow = Date.now.bind(Date);
  vi.spyOn(Date, "now").mockImplementation(() => realNow() - HOUR_MS);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const decided = await Promise.race([checking, new Promise<"still pending">((resolve) => (timer = setTimeout(() => resolve("still pending"), 5_000)))]);
  clearTimeout(timer);
  expect(decided).toMatchObject({ allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" });
  vi.restoreAllMocks();
});
