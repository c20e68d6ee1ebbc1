/**
 * Real Express, Fastify and Hono apps limited through floodgate/express,
 * floodgate/fastify and floodgate/fetch, against a real Floodgate (embedded,
 * and on Postgres and Redis): 429 with problem details and headers, headers on
 * allowed responses, THROTTLE's delay, LOG_ONLY, trustProxy off and on, the
 * skip list, the cookie, and Floodgate killed mid-traffic under each failure
 * mode.
 */

import { afterEach, describe, expect, it } from "vitest";
import type { FloodgateClient } from "floodgate/client";
import { AddListEntryDocument, BanDocument, RemoveListEntryDocument, type CreateRuleInput } from "../generated/graphql.js";
import { createRule, describeOnEachStorage, newTenant, realStorageAvailable, STORAGES } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { apiKey, patientClient } from "../support/floodgate-clients.js";
import { FRAMEWORKS, startWebApp, type Framework, type LimitOptions, type WebApp } from "../support/web-apps.js";

const running: { close(): Promise<void> }[] = [];

afterEach(async () => {
  for (const thing of running.splice(0).reverse()) await thing.close();
});

function keep<T extends { close(): Promise<void> }>(thing: T): T {
  running.push(thing);
  return thing;
}

const RATE_HEADERS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-policy", "ratelimit"];

function rateHeaders(response: Response): Record<string, string | null> {
  return Object.fromEntries(RATE_HEADERS.map((name) => [name, response.headers.get(name)]));
}

await describeOnEachStorage("middleware", (suite) => {
  describe.each(FRAMEWORKS)("%s", (framework: Framework) => {
    /** A web app of its own tenant, limited by `rule` through a CHECKER key's client. */
    async function limitedApp(rule: Omit<CreateRuleInput, "tenantId" | "name" | "window"> & { window?: number }, options: Partial<LimitOptions> = {}) {
      const tenant = newTenant();
      const created = await createRule(suite.client, { tenantId: tenant, name: "limit", windowUnit: "MINUTES", ...rule, window: rule.window ?? 1 });
      const client = keep(patientClient(suite.t.app.url, await apiKey(suite.client, tenant)));
      const app = keep(await startWebApp(framework, { client, tenant, ...options }));
      return { app, client, rule: created };
    }

    it("answers 429 with Retry-After, the decision's headers and an RFC 9457 problem body once over the limit", async () => {
      const { app } = await limitedApp({ scope: ["IP"], limit: 2, resource: "/api/**" });
      for (let i = 0; i < 2; i++) expect((await fetch(`${app.url}/api/orders`)).status).toBe(200);
      const denied = await fetch(`${app.url}/api/orders?page=2`);
      expect(denied.status).toBe(429);
      expect(denied.headers.get("content-type")).toMatch(/^application\/problem\+json(;|$)/);
      const body = (await denied.json()) as Record<string, unknown>;
      const retryAfter = Number(denied.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      // A sliding window counter may make a refused request wait past the window, never past two.
      expect(retryAfter).toBeLessThanOrEqual(120);
      const message = `Rate limit exceeded. Try again in ${retryAfter} ${retryAfter === 1 ? "second" : "seconds"}.`;
      expect(body).toEqual({
        type: "about:blank",
        title: "Too Many Requests",
        status: 429,
        detail: message,
        rule: "limit",
        retry_after: retryAfter,
        error: { code: "RATE_LIMIT_EXCEEDED", message, retry_after: retryAfter },
      });
      expect(rateHeaders(denied)).toMatchObject({ "x-ratelimit-limit": "2", "x-ratelimit-remaining": "0", "ratelimit-policy": expect.stringMatching(/^"limit";q=2;w=60;pk=:[A-Za-z0-9+/]+=*:$/) });
      expect(denied.headers.get("ratelimit")).toMatch(/^"limit";r=0;t=\d+;pk=:[A-Za-z0-9+/]+=*:$/);
    });

    it("answers 403 with a problem body naming nothing of the list for a deny-listed request, and serves it again once the entry is removed", async () => {
      const { app, client, rule } = await limitedApp({ scope: ["IP"], limit: 100 });
      const entry = (await suite.client.data(AddListEntryDocument, { input: { tenantId: rule.tenantId, list: "DENY", kind: "USER_AGENT", value: "*badbot*" } })).addListEntry;
      const asBot = { headers: { "user-agent": "Mozilla/5.0 (compatible; BadBot/2.1)" } };
      for (let i = 0; i < 2; i++) {
        const denied = await fetch(`${app.url}/api/orders`, asBot);
        expect(denied.status).toBe(403);
        expect(denied.headers.get("content-type")).toMatch(/^application\/problem\+json(;|$)/);
        expect(denied.headers.get("retry-after")).toBeNull();
        expect(await denied.json()).toEqual({ type: "about:blank", title: "Forbidden", status: 403, detail: "Access denied.", error: { code: "ACCESS_DENIED", message: "Access denied." } });
      }
      // Padded past the 1,024 characters Floodgate takes: cut, its name still read by the pattern.
      expect((await fetch(`${app.url}/api/orders`, { headers: { "user-agent": `${asBot.headers["user-agent"]} ${"x".repeat(2_000)}` } })).status).toBe(403);
      expect((await fetch(`${app.url}/api/orders`)).status).toBe(200);
      await suite.client.data(RemoveListEntryDocument, { id: entry.id });
      // Not served from the client's refusal cache: a screened refusal is never remembered there.
      expect((await fetch(`${app.url}/api/orders`, asBot)).status).toBe(200);
      expect(client.stats().refusalCache?.entries ?? 0).toBe(0);
    });

    it("releases a CONCURRENCY lease once the response has been sent: one slot serves request after request", async () => {
      const { app } = await limitedApp({ scope: ["IP"], algorithm: "CONCURRENCY", limit: 1 });
      /** The release follows the response: a request sent at once may still find the slot taken, for a moment, not for the rule's minute. */
      const servedSoon = async (path: string) => {
        for (let attempt = 0; attempt < 100; attempt++) {
          const response = await fetch(`${app.url}${path}`);
          await response.arrayBuffer();
          if (response.status === 200) return attempt;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        throw new Error(`${path} was never served: its slot was not released`);
      };
      for (let i = 0; i < 5; i++) expect(await servedSoon(`/upload/${i}`)).toBeLessThan(100);
    });

    it("puts the decision's headers on allowed responses", async () => {
      const { app } = await limitedApp({ scope: ["IP"], limit: 5 });
      const allowed = await fetch(`${app.url}/anything`);
      expect(allowed.status).toBe(200);
      expect(await allowed.json()).toEqual({ served: "/anything" });
      expect(rateHeaders(allowed)).toMatchObject({ "x-ratelimit-limit": "5", "x-ratelimit-remaining": "4", "ratelimit-policy": expect.stringMatching(/^"limit";q=5;w=60;pk=:[A-Za-z0-9+/]+=*:$/) });
      expect(Number(allowed.headers.get("x-ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000);
      expect(allowed.headers.get("retry-after")).toBeNull();
    });

    it("holds a THROTTLE rule's request for its delay, then serves it", async () => {
      const { app } = await limitedApp({ scope: ["IP"], algorithm: "TOKEN_BUCKET", limit: 1, window: 2, windowUnit: "SECONDS", action: "THROTTLE" });
      expect((await fetch(`${app.url}/slow`)).status).toBe(200);
      const started = performance.now();
      const held = await fetch(`${app.url}/slow`);
      const waited = performance.now() - started;
      expect(held.status).toBe(200);
      // The second token exists only ~2 s after the first was taken: the request waited for most of that.
      expect(waited).toBeGreaterThanOrEqual(1000);
    });

    it("lets a LOG_ONLY rule's over-limit requests through, without its headers", async () => {
      const { app, client } = await limitedApp({ scope: ["IP"], limit: 1, action: "LOG_ONLY" });
      const responses = await Promise.all([1, 2, 3].map(() => fetch(`${app.url}/shadowed`)));
      expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(responses.map((r) => r.headers.get("x-ratelimit-limit"))).toEqual([null, null, null]);
      expect(client.stats().decisions.network).toBe(3);
    });

    it("answers a banned caller 429 with Retry-After until the ban ends, and lets others through", async () => {
      const { app, rule } = await limitedApp({ scope: ["IP"], limit: 5 }, { trustProxy: 1 });
      await suite.client.data(BanDocument, { input: { tenantId: rule.tenantId, dimension: "IP", value: "203.0.113.9", durationSeconds: 600 } });
      const from = (forwardedFor: string) => fetch(`${app.url}/x`, { headers: { "x-forwarded-for": forwardedFor } });
      const banned = await from("203.0.113.9");
      expect(banned.status).toBe(429);
      expect(Number(banned.headers.get("retry-after"))).toBeGreaterThan(590);
      const other = await from("203.0.113.10");
      expect([other.status, other.headers.get("x-ratelimit-remaining")]).toEqual([200, "4"]);
    });

    it("never trusts X-Forwarded-For by default: the socket's address is the caller", async () => {
      const { app } = await limitedApp({ scope: ["IP"], limit: 1 });
      expect((await fetch(`${app.url}/x`, { headers: { "x-forwarded-for": "203.0.113.1" } })).status).toBe(200);
      expect((await fetch(`${app.url}/x`, { headers: { "x-forwarded-for": "203.0.113.2" } })).status).toBe(429);
    });

    it("with trustProxy 1 takes the address the one trusted proxy saw, the last of X-Forwarded-For", async () => {
      const { app } = await limitedApp({ scope: ["IP"], limit: 1 }, { trustProxy: 1 });
      const from = (forwardedFor: string) => fetch(`${app.url}/x`, { headers: { "x-forwarded-for": forwardedFor } }).then((r) => r.status);
      expect(await from("203.0.113.1")).toBe(200);
      expect(await from("203.0.113.2")).toBe(200);
      expect(await from("198.51.100.7, 203.0.113.1")).toBe(429);
      // A hop that is not an address stops the walk: the socket's own address is taken (not yet counted, then counted).
      expect(await from("not-an-address")).toBe(200);
      expect(await from("garbage")).toBe(429);
    });

    it("does not check the skip list's paths", async () => {
      const { app, client } = await limitedApp({ limit: 1 }, { skip: ["/healthz"] });
      const health = await Promise.all([1, 2, 3].map(() => fetch(`${app.url}/healthz`)));
      expect(health.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(health.map((r) => r.headers.get("x-ratelimit-limit"))).toEqual([null, null, null]);
      expect(client.stats().decisions.network).toBe(0);
    });

    it("adds the cookie cookieName names to the CLIENT fingerprint", async () => {
      const { app } = await limitedApp({ scope: ["CLIENT"], limit: 1 }, { cookieName: "session" });
      const as = (cookie: string) => fetch(`${app.url}/x`, { headers: { cookie } }).then((r) => r.status);
      expect(await as("theme=dark; session=a")).toBe(200);
      expect(await as("session=a")).toBe(429);
      expect(await as("session=b; theme=dark")).toBe(200);
    });
  });
});

const realAvailable = await realStorageAvailable();

for (const storage of STORAGES) {
  describe.runIf(storage === "embedded" || realAvailable)(`middleware with Floodgate killed mid-traffic (${storage})`, () => {
    it("decides every request by each failure mode, at once, and nothing hangs", async () => {
      const floodgate = await startTestApp(storage);
      let floodgateRunning = true;
      let traffic = true;
      try {
        const apps: { framework: Framework; mode: "OPEN" | "CLOSED" | "LOCAL"; app: WebApp; client: FloodgateClient }[] = [];
        for (const framework of FRAMEWORKS) {
          for (const mode of ["OPEN", "CLOSED", "LOCAL"] as const) {
            // A tenant per app: every app's callers share the loopback address.
            const tenant = newTenant();
            await createRule(floodgate.client, { tenantId: tenant, name: "per-ip", scope: ["IP"], algorithm: "SLIDING_WINDOW_LOG", limit: 3, window: 1, windowUnit: "HOURS", resource: "/api/**" });
            const client = keep(patientClient(floodgate.app.url, await apiKey(floodgate.client, tenant), { failureMode: mode, timeoutMs: 250 }));
            apps.push({ framework, mode, client, app: keep(await startWebApp(framework, { client, tenant })) });
          }
        }
        // Every app has seen the rule (LOCAL learns it) before Floodgate goes.
        for (const { app } of apps) expect((await fetch(`${app.url}/api/before`)).status).toBe(200);

        const statuses: number[] = [];
        const loops = apps.flatMap(({ app }) =>
          [1, 2].map(async () => {
            while (traffic) statuses.push((await fetch(`${app.url}/background`)).status);
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        await floodgate.stop();
        floodgateRunning = false;
        await new Promise((resolve) => setTimeout(resolve, 300));
        traffic = false;
        await Promise.all(loops);
        // /background is under no rule: allowed while Floodgate answers, and after by OPEN and LOCAL; CLOSED refuses.
        expect(statuses.length).toBeGreaterThan(0);
        expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);

        let slowest = 0;
        for (const { framework, mode, app, client } of apps) {
          const outcomes: [number, string | null][] = [];
          for (let i = 0; i < 5; i++) {
            const started = performance.now();
            const response = await fetch(`${app.url}/api/after`);
            slowest = Math.max(slowest, performance.now() - started);
            outcomes.push([response.status, response.headers.get("retry-after")]);
          }
          const expected: Record<typeof mode, [number, string | null][]> = {
            OPEN: Array(5).fill([200, null]),
            CLOSED: Array(5).fill([429, "1"]),
            // Counters of its own from the outage's start: the rule's 3 per hour, then its hour to wait.
            LOCAL: [[200, null], [200, null], [200, null], [429, "3600"], [429, "3600"]],
          };
          expect(outcomes, `${framework} ${mode}`).toEqual(expected[mode]);
          expect(client.stats().outages.unreachable, `${framework} ${mode}`).toBeGreaterThan(0);
        }
        console.log(`Floodgate killed (${storage}): the slowest request decided by failure mode took ${slowest.toFixed(0)} ms (deadline 250 ms)`);
      } finally {
        traffic = false;
        if (floodgateRunning) await floodgate.stop();
      }
    }, 120_000);
  });
}
