/**
 * Answers that are not Floodgate's. A proxy in front of Floodgate (or
 * a broken one) can answer anything; a check must still resolve by the
 * failure mode, and never hang or throw for it.
 */

import { createServer, type Server } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { FloodgateError } from "floodgate/client";
import { closedAfterEachTest, patientClient } from "../support/floodgate-clients.js";

const { track } = closedAfterEachTest();

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

let requests = 0;

/** A server in front of Floodgate answering every request with this status and body (`requests` counts them). */
async function answering(status: number, body: string, contentType = "application/json"): Promise<string> {
  requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on("end", () => res.writeHead(status, { "content-type": contentType }).end(body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return `http://127.0.0.1:${port}/graphql`;
}

/** What the promise settles to, or "still pending" after `ms`: a check that hangs shows as that, not as the test's own timeout. */
async function settledWithin<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | "still pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const pending = new Promise<"still pending">((resolve) => (timer = setTimeout(() => resolve("still pending"), ms)));
  try {
    return await Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), pending]);
  } finally {
    clearTimeout(timer);
  }
}

describe("FloodgateClient, answers that are not Floodgate's", () => {
  for (const [what, status, body] of [
    ["a 200 whose body is JSON null", 200, "null"],
    ["a 429 from a proxy whose body is JSON null", 429, "null"],
  ] as const) {
    it(`decides a check by failure mode on ${what}, counted as a server error`, async () => {
      const url = await answering(status, body);
      const client = track(patientClient(url, "secret", { cache: false, timeoutMs: 1_000, failureMode: "CLOSED" }));
      const settled = await settledWithin(client.check({ tenantId: "acme", userId: "u1" }), 5_000);
      expect(settled).toMatchObject({ value: { allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" } });
      expect(client.stats().outages.serverErrors).toBe(1);
    });
  }

  it("throws UNAVAILABLE from resetLimit on a body that is JSON null, not a TypeError", async () => {
    const url = await answering(200, "null");
    const client = track(patientClient(url, "secret", { cache: false, timeoutMs: 1_000 }));
    const settled = await settledWithin(client.resetLimit("rule-1", "user:u1"), 5_000);
    expect(settled).toMatchObject({ error: expect.any(FloodgateError) });
    expect(settled).toMatchObject({ error: { code: "UNAVAILABLE" } });
  });

  it("fails every check of a batch at once, in one request, when Floodgate refuses the client's document (an older Floodgate, a field it does not know)", async () => {
    const refusal = { errors: [{ message: 'Field "ignorePathCase" is not defined by type "CheckLimitsInput".', extensions: { code: "GRAPHQL_VALIDATION_FAILED" } }] };
    const url = await answering(400, JSON.stringify(refusal));
    const client = track(patientClient(url, "secret", { cache: false, timeoutMs: 1_000, failureMode: "OPEN" }));
    const checks = Array.from({ length: 10 }, (_, i) => client.check({ tenantId: "acme", userId: `u${i}`, ignorePathCase: true }));
    const settled = await Promise.all(checks.map((check) => settledWithin(check, 5_000)));
    for (const outcome of settled) expect(outcome).toMatchObject({ error: { code: "GRAPHQL_VALIDATION_FAILED" } });
    expect(requests).toBe(1);
    expect(client.stats()).toMatchObject({ callerErrors: 10, outages: { serverErrors: 0 } });
  });
});
