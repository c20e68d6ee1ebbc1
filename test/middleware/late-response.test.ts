/**
 * An Express response answered by something else while its check was still
 * pending (a request-timeout middleware in front of the limiter, answering
 * 503 while a slow Floodgate is waited for): the verdict that comes after
 * must neither touch the sent response nor go on to the routes, and above all
 * must not throw where nothing catches it (an unhandled rejection ends a
 * Node process).
 */

import type { AddressInfo } from "node:net";
import express from "express";
import { describe, expect, it } from "vitest";
import { floodgate as expressFloodgate } from "floodgate/express";
import { patientClient, silentServer } from "../support/floodgate-clients.js";
import { embeddedFloodgate } from "./embedded-floodgate.js";

const floodgate = embeddedFloodgate();

describe("express", () => {
  it.each(["OPEN", "CLOSED"] as const)("leaves alone a response sent while its check was pending (decided %s)", async (failureMode) => {
    // A Floodgate that never answers: the client decides by failureMode at its deadline, after the 503 went out.
    const silent = floodgate.keep(await silentServer());
    const client = floodgate.keep(patientClient(silent.url, "fg_silent_token_xxxxxxxx", { timeoutMs: 300, failureMode }));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    let routed = 0;
    const app = express();
    app.use((_req, res, next) => {
      setTimeout(() => void res.status(503).send("timed out"), 50);
      next();
    });
    app.use(expressFloodgate({ client, tenant: "acme" }));
    app.all("/{*path}", (_req, res) => {
      routed++;
      if (!res.headersSent) res.json({ served: true });
    });
    const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
      const listening = app.listen(0, "127.0.0.1", () => resolve(listening));
    });
    floodgate.keep({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/x`);
      expect([response.status, await response.text()]).toEqual([503, "timed out"]);
      // Past the client's deadline: the verdict has come and been acted on.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(client.stats().decisions.failureMode).toBe(1);
      expect(unhandled).toEqual([]);
      expect(routed).toBe(0);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
