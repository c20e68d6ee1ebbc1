/**
 * The path a check carries, as the app routes it: an Express middleware
 * mounted under a path (Express strips the mount from request.url), and a
 * percent-encoded spelling of a limited path, which Fastify and Hono decode
 * before routing (Express hands it decoded to its route parameters). And the
 * skip list, a hole in the limits: only a path as sent is skipped, never
 * another spelling of it.
 */

import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import { FRAMEWORKS, startExpress, startWebApp, type Framework } from "../support/web-apps.js";
import { embeddedFloodgate } from "./embedded-floodgate.js";

const floodgate = embeddedFloodgate();

/** Sends `path` exactly as written (fetch would normalise it): its status. */
function rawGet(base: string, path: string): Promise<number> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sent = httpRequest({ host: hostname, port, path, method: "GET" }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    sent.on("error", reject);
    sent.end();
  });
}

describe("express mounted under a path", () => {
  it("checks the request's whole path, not the path below the mount", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startExpress({ client, tenant }, "/api"));
    expect((await fetch(`${app.url}/api/orders`)).status).toBe(200);
    expect((await fetch(`${app.url}/api/orders`)).status).toBe(429);
  });

  it("skips the skip list's paths as the request names them", async () => {
    const { client, tenant } = await floodgate.limited({ limit: 1 });
    const app = floodgate.keep(await startExpress({ client, tenant, skip: ["/api/healthz"] }, "/api"));
    for (let i = 0; i < 3; i++) expect((await fetch(`${app.url}/api/healthz`)).status).toBe(200);
    expect(client.stats().decisions.network).toBe(0);
  });
});

describe.each(FRAMEWORKS)("%s", (framework: Framework) => {
  it("counts a percent-encoded spelling of a limited path against its rule", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    // Routed to /api/orders by Fastify and Hono ("%6F" is "o"): the same rule's bucket.
    expect(await rawGet(app.url, "/api/%6Frders")).toBe(429);
    expect(await rawGet(app.url, "/%61pi/orders?x=1")).toBe(429);
  });

  it("never decodes an escape into a dot segment that would move a path out from under its rule", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/**" });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    // Still below /api as Fastify and Express route them (Hono's URL folds "%2e%2e" itself, to /admin: no longer below /api there).
    for (const path of ["/api/%2e%2e/admin", "/api/%2E/x", "/api/%2e%2e%00/admin", "/api/.%2e%0a/admin"]) {
      if (framework === "hono" && path === "/api/%2e%2e/admin") continue;
      expect(await rawGet(app.url, path), path).toBe(429);
    }
  });

  it("checks a skip-listed path spelt another way (a skip is a hole: only the path as sent is skipped)", async () => {
    const { client, tenant } = await floodgate.limited({ limit: 1000 });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant, skip: ["/healthz"] }));
    expect(await rawGet(app.url, "/healthz?probe=1")).toBe(200);
    expect(client.stats().decisions.network).toBe(0);
    // Express routes none of these to /healthz: skipping them would let them past every rule.
    for (const path of ["/%68ealthz", "/healthz/..", "/healthz/x", "/healthz%2Fx", "/HEALTHZ"]) await rawGet(app.url, path);
    expect(client.stats().decisions.network).toBe(5);
  });
});
