/**
 * SIGTERM on the real process: it stops accepting, lets a request in flight
 * finish, closes subscriptions with 1001 (going away), closes its stores and
 * exits 0.
 */

import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import { createClient } from "graphql-ws";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { testAdminToken } from "../harness/in-process-app.js";
import { freePort } from "../harness/free-port.js";
import { startServiceProcess } from "../harness/service-process.js";

const TOKEN = testAdminToken();

describe("shutdown on SIGTERM", () => {
  let child: ChildProcess | null = null;
  afterEach(() => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });

  // The start alone may take startServiceProcess's 30 s on a loaded machine (tsx compiles the sources): room for it and the rest.
  it("finishes the request in flight, closes subscriptions with 1001, and exits 0", { timeout: 60_000 }, async () => {
    const port = await freePort();
    child = await startServiceProcess(port, { SHUTDOWN_TIMEOUT_MS: "5000", ADMIN_TOKEN: TOKEN });
    const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));

    const closeCode = new Promise<number>((resolve) => {
      const subscriptions = createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${TOKEN}` },
        on: { closed: (event) => resolve((event as { code: number }).code) },
      });
      subscriptions.subscribe({ query: "subscription { ruleChanges { ruleId } }" }, { next: () => undefined, error: () => undefined, complete: () => undefined });
    });
    await new Promise((r) => setTimeout(r, 300));

    // A check whose body is still arriving when SIGTERM comes: in flight.
    const body = JSON.stringify({ query: '{ checkLimits(request: { tenantId: "t", userId: "u" }) { allowed } }' });
    const inFlight = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path: "/graphql", method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${TOKEN}` } },
        (res) => {
          let text = "";
          res.on("data", (chunk) => (text += chunk));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on("error", reject);
      req.write(body.slice(0, 10));
      setTimeout(() => {
        child!.kill("SIGTERM");
        setTimeout(() => req.end(body.slice(10)), 200);
      }, 100);
    });

    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect(JSON.parse(answered.text)).toEqual({ data: { checkLimits: { allowed: true } } });
    expect(await closeCode).toBe(1001);
    expect(await exited).toBe(0);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });
});
