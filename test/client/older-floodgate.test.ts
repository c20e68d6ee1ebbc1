/**
 * A client newer than its Floodgate. The Floodgate here is a real one behind
 * a proxy that renames the client's ignorePathCase to a field the schema
 * lacks and names it back in the answer: what a Floodgate older than the
 * field says, a variable refused (BAD_USER_INPUT) without a check's field.
 */

import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FloodgateError } from "floodgate/client";
import { newTenant } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { apiKey, closedAfterEachTest, patientClient } from "../support/floodgate-clients.js";
import type { TestApp } from "../harness/in-process-app.js";

const { track } = closedAfterEachTest();
const UNKNOWN = "fieldOfALaterFloodgate";
let floodgate: TestApp;
let older: Server;
let requests = 0;

beforeAll(async () => {
  floodgate = await startTestApp("embedded");
  const target = new URL(floodgate.app.url);
  older = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      requests++;
      const sent = body.replaceAll('"ignorePathCase"', `"${UNKNOWN}"`);
      const forwarded = httpRequest(
        { host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: { ...req.headers, "content-length": Buffer.byteLength(sent) } },
        (answer) => {
          let text = "";
          answer.setEncoding("utf8");
          answer.on("data", (chunk: string) => (text += chunk));
          answer.on("end", () => res.writeHead(answer.statusCode ?? 500, { "content-type": "application/json" }).end(text.replaceAll(UNKNOWN, "ignorePathCase")));
        },
      );
      forwarded.end(sent);
    });
  });
  await new Promise<void>((resolve) => older.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  older?.closeAllConnections();
  await new Promise<void>((resolve) => older?.close(() => resolve()));
  await floodgate?.stop();
});

describe("FloodgateClient against a Floodgate older than a field it sends", () => {
  it("fails at once the checks that send the field, naming it, and has the others decided in one more request", async () => {
    const tenantId = newTenant();
    const url = `http://127.0.0.1:${(older.address() as AddressInfo).port}/graphql`;
    const client = track(patientClient(url, await apiKey(floodgate.client, tenantId), { cache: false, failureMode: "OPEN" }));
    requests = 0;
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.check({ tenantId, userId: `u${i}`, apiKey: `secret-of-u${i}`, resource: "/API/Orders", ...(i % 2 === 0 ? { ignorePathCase: true } : {}) }).then(
          (decision) => ({ allowed: decision.allowed, degraded: decision.degraded }),
          (error: FloodgateError) => ({ code: error.code, field: error.field, message: error.message }),
        ),
      ),
    );
    // The client's words, not Floodgate's: those quote the first such check's values (an API key, a cookie) to every caller.
    const refused = { code: "BAD_USER_INPUT", field: "request.ignorePathCase", message: 'Floodgate does not know the input field "ignorePathCase": it is older than this client (upgrade Floodgate first)' };
    expect(outcomes).toEqual(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? refused : { allowed: true, degraded: false })));
    expect(requests).toBe(2);
    expect(client.stats()).toMatchObject({ callerErrors: 5, outages: { serverErrors: 0 } });
  });
});
