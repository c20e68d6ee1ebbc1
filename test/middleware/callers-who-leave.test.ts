/**
 * A caller that leaves, its connection closed, while its request is being
 * checked or held for THROTTLE's delay: its route must not run (the work the
 * throttle held back, done for nobody, and done twice when the caller
 * retries), and a CONCURRENCY slot it took must come back at once, not when
 * the rule's window ends. And the slot of a HEAD request, whose response
 * body is never sent (Hono drops it unread).
 */

import { request as httpRequest } from "node:http";
import { describe, expect, it } from "vitest";
import { FRAMEWORKS, startWebApp, type Framework, type WebApp } from "../support/web-apps.js";
import { embeddedFloodgate } from "./embedded-floodgate.js";

const floodgate = embeddedFloodgate();

/** Floodgate as a client sees it over a slow network: each request sent `ms` late, so a check stays pending that long. */
function lateFetch(ms: number): typeof fetch {
  return async (input, init) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return fetch(input, init);
  };
}

/** Sends a GET of `path` and closes its connection after `ms`, before any answer. */
function leaveAfter(base: string, path: string, ms: number): Promise<void> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const sent = httpRequest({ host: hostname, port, path, method: "GET" }, (response) => response.resume());
    sent.on("error", () => undefined);
    sent.end();
    setTimeout(() => {
      sent.destroy();
      resolve();
    }, ms);
  });
}

/** Asks for `path` until it is served (its slot free again), at most `attempts` times: the attempt it was served at. */
async function servedWithin(app: WebApp, path: string, attempts: number, method = "GET"): Promise<number> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const response = await fetch(`${app.url}${path}`, { method });
    await response.arrayBuffer();
    if (response.status === 200) return attempt;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} was never served: its slot was not released`);
}

const ONE_SLOT: Parameters<typeof floodgate.limited>[0] = { scope: ["IP"], algorithm: "CONCURRENCY", limit: 1, window: 10 };

describe.each(FRAMEWORKS)("%s", (framework: Framework) => {
  it("hands back the slot of a caller that left while its check was pending, and does not route its request where the runtime tells", async () => {
    const { client, tenant } = await floodgate.limited(ONE_SLOT, { fetch: lateFetch(300) });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    await leaveAfter(app.url, "/upload/left", 50);
    // The check admits it at ~300 ms, its caller long gone. Held, the slot would refuse everyone for the rule's 10 minutes.
    expect(await servedWithin(app, "/upload/next", 50)).toBeLessThan(50);
    // @hono/node-server makes a request's signal only when it is read, and floodgate/fetch reads it after the check
    // (before, for every request, it cost a bare app most of its throughput: fetch.ts): a caller gone during the
    // check is routed there, its slot handed back all the same.
    expect(app.served).toEqual(framework === "hono" ? ["/upload/left", "/upload/next"] : ["/upload/next"]);
  });

  it("does not route a request THROTTLE held whose caller left during the delay", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], algorithm: "TOKEN_BUCKET", limit: 1, window: 2, windowUnit: "SECONDS", action: "THROTTLE" });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    expect((await fetch(`${app.url}/work/1`)).status).toBe(200);
    // Held until the next token, ~2 s; its caller leaves after 300 ms.
    await leaveAfter(app.url, "/work/2", 300);
    // Refused while its wait is longer than THROTTLE holds a request for, then held until the token after
    // /work/2's, ~2 s after it: by then /work/2's delay has long ended.
    expect(await servedWithin(app, "/work/3", 200)).toBeLessThan(200);
    expect(app.served).toEqual(["/work/1", "/work/3"]);
  });

  it("hands back the slot of a HEAD request, whose body is never sent", async () => {
    const { client, tenant } = await floodgate.limited(ONE_SLOT);
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    for (let i = 0; i < 3; i++) expect(await servedWithin(app, `/report/${i}`, 50, "HEAD")).toBeLessThan(50);
    expect(await servedWithin(app, "/report/get", 50)).toBeLessThan(50);
  });
});
