/**
 * The path a check carries, as the app routes it: an Express middleware
 * mounted under a path (Express strips the mount from request.url), and a
 * percent-encoded spelling of a limited path, which Fastify and Hono decode
 * before routing (Express hands it decoded to its route parameters). Dot
 * segments, which Floodgate folds and Express and Fastify route as sent, and
 * an absolute-form request target ("GET http://host/path HTTP/1.1"), whose
 * path is read as sent. Letter case, which Express's routers ignore unless
 * told otherwise, and Fastify's when told (ignorePathCase). And the skip list, a hole in the limits: only a path as
 * sent is skipped, never another spelling of it.
 */

import { request as httpRequest } from "node:http";
import { connect } from "node:net";
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

/** Sends a request line with `target` as written (an absolute-form one, say) on a connection of its own: its status. */
function rawTarget(base: string, target: string): Promise<number> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(`GET ${target} HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\n\r\n`));
    let answer = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("end", () => resolve(Number(answer.split(" ")[1])));
    socket.on("error", reject);
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

  it("counts a dot segment a router serves below a rule's path against that rule, written plain or in an absolute-form target", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/**" });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    const { host } = new URL(app.url);
    const paths = ["/api/../admin", "/api/./../admin", "/api/orders/../../admin", `http://${host}/api/../admin`, `http://${host}/api/%2e%2e/admin`];
    // Express and Fastify serve each below /api, as sent; Hono's URL folds each to /admin, which it serves there.
    for (const path of paths) expect(await rawTarget(app.url, path), path).toBe(framework === "hono" ? 200 : 429);
  });

  it("reads an absolute-form target's path as sent for the skip list: one that leaves the skipped path is checked", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1 });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant, skip: ["/healthz"] }));
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    const target = `http://${new URL(app.url).host}/api/orders/../../healthz`;
    // Routed as sent by Express and Fastify, to the routes below /api: checked, over the limit. Hono's URL folds it to /healthz, served and skipped there.
    for (let i = 0; i < 2; i++) expect(await rawTarget(app.url, target)).toBe(framework === "hono" ? 200 : 429);
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

describe("letter case", () => {
  const SPELLINGS = ["/API/orders", "/Api/Orders", "/api/ORDERS"];

  it("express: counts every spelling its routing serves alike under the rule, and in one ENDPOINT bucket", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startWebApp("express", { client, tenant }));
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    for (const path of SPELLINGS) expect(await rawGet(app.url, path), path).toBe(429);

    const perEndpoint = await floodgate.limited({ scope: ["ENDPOINT"], limit: 1, resource: "/api/**" });
    const second = floodgate.keep(await startWebApp("express", { client: perEndpoint.client, tenant: perEndpoint.tenant }));
    expect(await rawGet(second.url, "/api/Orders")).toBe(200);
    for (const path of SPELLINGS) expect(await rawGet(second.url, path), path).toBe(429);
    expect(await rawGet(second.url, "/api/users")).toBe(200);
  });

  it("express: a rule on a mixed-case path counts its route in every spelling", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/getUser" });
    const app = floodgate.keep(await startWebApp("express", { client, tenant }));
    expect(await rawGet(app.url, "/api/getUser")).toBe(200);
    for (const path of ["/api/getUser", "/api/getuser", "/API/GETUSER"]) expect(await rawGet(app.url, path), path).toBe(429);
  });

  it("express with ignorePathCase false: counts a path as spelt (for an app whose every router is case-sensitive)", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startWebApp("express", { client, tenant, ignorePathCase: false, caseSensitiveRouting: true }));
    for (const path of SPELLINGS) expect(await rawGet(app.url, path), path).toBe(200);
    expect(await rawGet(app.url, "/api/orders")).toBe(200);
    expect(await rawGet(app.url, "/api/orders")).toBe(429);
  });

  it("fastify: counts a path as spelt, as its router does by default, and every spelling alike when its router ignores case", async () => {
    const sensitive = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startWebApp("fastify", { client: sensitive.client, tenant: sensitive.tenant }));
    for (const path of SPELLINGS) expect(await rawGet(app.url, path), path).toBe(200);

    const insensitive = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const second = floodgate.keep(await startWebApp("fastify", { client: insensitive.client, tenant: insensitive.tenant, caseSensitiveRouting: false }));
    expect(await rawGet(second.url, "/api/orders")).toBe(200);
    for (const path of SPELLINGS) expect(await rawGet(second.url, path), path).toBe(429);
  });

  it("fastify ignoring case: folds as its router does, so a dotted capital I and a final sigma count under the rule spelt with them", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 2, resource: "/İstanbul/ΟΔΟΣ*" });
    const app = floodgate.keep(await startWebApp("fastify", { client, tenant, caseSensitiveRouting: false }));
    // Fastify's router folds with toLowerCase: "İ" is "i" and a combining dot; "Σ" ending a word is "ς".
    expect(await rawGet(app.url, "/%C4%B0stanbul/%CE%9F%CE%94%CE%9F%CE%A3")).toBe(200);
    expect(await rawGet(app.url, "/i%CC%87stanbul/%CE%BF%CE%B4%CE%BF%CF%82-1")).toBe(200);
    expect(await rawGet(app.url, "/%C4%B0STANBUL/%CE%BF%CE%B4%CE%BF%CF%83")).toBe(429);
  });

  it("hono: counts a path as spelt, as its router does", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders" });
    const app = floodgate.keep(await startWebApp("hono", { client, tenant }));
    for (const path of SPELLINGS) expect(await rawGet(app.url, path), path).toBe(200);
  });
});
