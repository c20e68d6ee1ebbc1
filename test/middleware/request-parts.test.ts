/**
 * What the middleware reads of a request that no caller should be able to
 * turn into a failed check ("no header can make a check fail", gate.ts):
 * an X-Forwarded-For hop that only looks like an address, a method Floodgate
 * does not know (Node, Express, Fastify and Hono all serve PURGE, PROPFIND...).
 * A token longer than Floodgate takes, which must still tell its caller
 * apart. And X-Forwarded-For in a fetch runtime that does not tell the peer's
 * address.
 */

import { describe, expect, it } from "vitest";
import { floodgate as fetchFloodgate } from "floodgate/fetch";
import { FRAMEWORKS, startWebApp, type Framework } from "../support/web-apps.js";
import { embeddedFloodgate } from "./embedded-floodgate.js";

const floodgate = embeddedFloodgate();

describe.each(FRAMEWORKS)("%s", (framework: Framework) => {
  it("with trustProxy, stops the walk at a hop that only looks like an address instead of failing the check", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1 });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant, trustProxy: 1 }));
    const from = (forwardedFor: string) => fetch(`${app.url}/x`, { headers: { "x-forwarded-for": forwardedFor } }).then((r) => r.status);
    // Each is not an address (Floodgate refuses it): the socket's own address is taken, counted once, then over the limit.
    expect(await from("203.0.113.256")).toBe(200);
    for (const hop of ["01.2.3.4", ":::", "1:2:3:4:5:6:7:8:9", "::ffff:203.0.113.999", "1.2.3.4.5"]) expect(await from(hop), hop).toBe(429);
    expect(client.stats().callerErrors).toBe(0);
  });

  it("checks a request whose method Floodgate does not know, without its method, instead of failing it", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1 });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    const purge = () => fetch(`${app.url}/cache/item`, { method: "PURGE" }).then((r) => r.status);
    // Checked and let through: served by Express's and Hono's all(); Fastify's all() routes no PURGE (its 404, after the check).
    expect(await purge()).toBe(framework === "fastify" ? 404 : 200);
    expect(await purge()).toBe(429);
    expect(client.stats().callerErrors).toBe(0);
  });

  it("tells apart callers whose bearer tokens are longer than Floodgate takes and begin alike (JSON web tokens of one issuer)", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["API_KEY"], limit: 1 });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    const sameStart = `eyJhbGciOiJSUzI1NiJ9.${"e".repeat(400)}`;
    const as = (caller: string) => fetch(`${app.url}/x`, { headers: { authorization: `Bearer ${sameStart}.${caller}` } }).then((r) => r.status);
    expect(await as("alice")).toBe(200);
    expect(await as("bob")).toBe(200);
    expect(await as("alice")).toBe(429);
    expect(client.stats().callerErrors).toBe(0);
  });
});

describe("floodgate/fetch", () => {
  it("hands a network error response back as it is, and frees the request's slot", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["TENANT"], algorithm: "CONCURRENCY", limit: 1 });
    const limit = fetchFloodgate({ client, tenant });
    const first = new Request("https://app.example/upstream");
    expect(await limit(first)).toBeUndefined();
    const failed = Response.error();
    expect(limit.withHeaders(first, failed)).toBe(failed);
    // The release follows: the next request finds the one slot free within moments, not at the rule's minute.
    let admitted = false;
    for (let attempt = 0; attempt < 50 && !admitted; attempt++) {
      admitted = (await limit(new Request("https://app.example/upstream"))) === undefined;
      if (!admitted) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(admitted).toBe(true);
  });
});

describe("fetch without the peer's address", () => {
  it("with trustProxy 1 takes the address the proxy saw from X-Forwarded-For", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1 });
    // Next.js middleware and edge runtimes: no socket, the platform's proxy appends X-Forwarded-For.
    const limit = fetchFloodgate({ client, tenant, trustProxy: 1 });
    const from = async (forwardedFor: string) => (await limit(new Request("https://app.example/x", { headers: { "x-forwarded-for": forwardedFor } })))?.status ?? 200;
    expect(await from("203.0.113.1")).toBe(200);
    expect(await from("203.0.113.2")).toBe(200);
    expect(await from("198.51.100.7, 203.0.113.1")).toBe(429);
  });
});
