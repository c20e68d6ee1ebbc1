/**
 * floodgate/client against a real Floodgate (embedded, and on Postgres and
 * Redis): batching, bad input and forbidden checks isolated within a batch,
 * the refusal cache and what makes it forget, the failure modes, resetLimit
 * and the options.
 */

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { describe, expect, it } from "vitest";
import { FloodgateClient, FloodgateError, type CheckRequest, type FetchFunction, type FloodgateDecision } from "floodgate/client";
import { BanDocument, CheckLimitsAsTheClientHasItDocument, SetOverrideDocument, UnbanDocument, UpdateRuleDocument } from "../generated/graphql.js";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, hangingUpServer, patientClient, refusingUrl, silentServer, until, untilCacheLive } from "../support/floodgate-clients.js";
import { startTcpProxy } from "../harness/tcp-proxy.js";
import { CONNECT_TIMEOUT_MS } from "../../src/client/invalidation-feed.js";

const { track, cleanups } = closedAfterEachTest();

/** Checks made at once by separate callers (checkMany's would travel as one group, never split). */
function checkAtOnce(client: FloodgateClient, requests: readonly CheckRequest[]): Promise<FloodgateDecision[]> {
  return Promise.all(requests.map((request) => client.check(request)));
}

const header = (decision: FloodgateDecision, name: string) => decision.headers.find((h) => h.name === name)?.value;

await describeOnEachStorage("FloodgateClient", (suite) => {
  async function perUser(tenantId: string, limit: number, extra: Partial<Parameters<typeof createRule>[1]> = {}) {
    return createRule(suite.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit, window: 1, windowUnit: "HOURS", ...extra });
  }

  describe("batching", () => {
    it("gathers concurrent checks into one checkLimitsBatch request, each decided as if alone", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 30);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false }));
      const decisions = await Promise.all(Array.from({ length: 40 }, () => client.check({ tenantId, userId: "u1" })));
      expect(client.stats()).toMatchObject({ batches: 1, meanBatchSize: 40, decisions: { network: 40 } });
      expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
      expect(decisions.slice(0, 30).map((d) => d.remaining)).toEqual(Array.from({ length: 30 }, (_, i) => 29 - i));
      expect(decisions.slice(30).every((d) => !d.allowed && d.source === "COUNTER_STORE")).toBe(true);
    });

    it("hands back what a plain checkLimits selecting every field answers: rules asked for in full, known, or learnt from dry runs", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 30, { burst: 5, method: "POST", priority: 3 });
      const perIp = await createRule(suite.client, { tenantId, name: "per-ip", scope: ["IP"], limit: 50, window: 1, windowUnit: "MINUTES", action: "LOG_ONLY" });
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false }));
      const request = { tenantId, userId: "u1", ip: "10.0.0.1", method: "POST", resource: "/api/orders", dryRun: true };
      // Dry runs, so both see the same counters; asked again until both fall in one second, which the headers' seconds depend on.
      const expectSameDecision = async () => {
        for (;;) {
          const viaClient = await client.check(request);
          const plain = (await suite.client.data(CheckLimitsAsTheClientHasItDocument, { request })).checkLimits;
          if (viaClient.decidedAt.slice(0, 19) !== plain.decidedAt.slice(0, 19)) continue;
          expect(plain.results).toHaveLength(2);
          expect(viaClient).toEqual({ ...plain, decidedAt: viaClient.decidedAt });
          return;
        }
      };
      // The tenant's first batch asks for the rules in full; the next one names rules the client knows.
      await expectSameDecision();
      await expectSameDecision();
      // A version the client has not seen: it learns the rule from the same check sent as a dry run.
      await suite.client.data(UpdateRuleDocument, { id: perIp.id, input: { limit: 40 } });
      await expectSameDecision();
    });

    it("hands back each rule's nearLimit and retryAfter as Floodgate forms them, though its batches do not carry them", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 10);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false }));
      const request = { tenantId, userId: "u1", ip: "10.0.0.1", method: "POST", resource: "/api/orders" };
      const dryRun = { ...request, dryRun: true };
      // Dry runs see the same counters; asked again until both fall in one second, which the headers' seconds depend on.
      const bothAt = async () => {
        for (;;) {
          const viaClient = await client.check(dryRun);
          const plain = (await suite.client.data(CheckLimitsAsTheClientHasItDocument, { request: dryRun })).checkLimits;
          if (viaClient.decidedAt.slice(0, 19) === plain.decidedAt.slice(0, 19)) return { viaClient, plain };
        }
      };
      // Nine of ten taken: the tenth would be admitted with none left, under a tenth of the limit.
      await client.checkMany(Array.from({ length: 9 }, () => request));
      const near = await bothAt();
      expect(near.plain.results[0]).toMatchObject({ allowed: true, nearLimit: true, retryAfter: null });
      expect(near.viaClient).toEqual({ ...near.plain, decidedAt: near.viaClient.decidedAt });
      // All ten taken: refused, with a wait that moves with the millisecond each was decided at.
      await client.check(request);
      const { viaClient, plain } = await bothAt();
      for (const decision of [viaClient, plain]) {
        const [result] = decision.results;
        expect(result).toMatchObject({ allowed: false, nearLimit: false });
        expect(result!.retryAfterMs).toBeGreaterThan(0);
        expect(result!.retryAfter).toBe(Math.ceil(result!.retryAfterMs! / 1000));
      }
      const withoutWaits = (decision: FloodgateDecision) => ({ ...decision, decidedAt: null, retryAfter: null, retryAfterMs: null, headers: null, results: decision.results.map((r) => ({ ...r, retryAfter: null, retryAfterMs: null })) });
      expect(withoutWaits(viaClient)).toEqual(withoutWaits(plain));
    });

    it("sends a batch of many callers as batch.parallel requests in flight together, each caller's checks in one of them, in order", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 2);
      const key = await apiKey(suite.client, tenantId);
      const users = Array.from({ length: 16 }, (_, i) => `u${i}`);
      const requests = [0, 1, 2].flatMap(() => users.map((userId) => ({ tenantId, userId })));
      for (const parallel of [2, 1]) {
        const client = track(patientClient(suite.t.app.url, key, { cache: false, batch: { parallel } }));
        const decisions = await checkAtOnce(client, requests.map((r) => ({ ...r, userId: `${r.userId}-${parallel}` })));
        expect(client.stats()).toMatchObject({ batches: parallel, decisions: { network: 48 } });
        // Each caller's first two checks admitted, in the order made, and its third refused.
        expect(decisions.map((d) => d.remaining)).toEqual([...users.map(() => 1), ...users.map(() => 0), ...users.map(() => 0)]);
        expect(decisions.map((d) => d.allowed)).toEqual([...users.map(() => true), ...users.map(() => true), ...users.map(() => false)]);
      }
    });

    it("splits a closing batch only into the requests free to go: one that closes while batch.parallel are in flight goes whole", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 10);
      // Requests held until released, so that which are in flight is known.
      const held: { size: number; release(): void }[] = [];
      const heldFetch: FetchFunction = async (input, init) => {
        await new Promise<void>((release) => held.push({ size: (JSON.parse(init.body) as { variables: { requests: unknown[] } }).variables.requests.length, release }));
        return fetch(input, init);
      };
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: heldFetch }));
      const callers = (from: number) => Array.from({ length: 32 }, (_, i) => ({ tenantId, userId: `u${from + i}` }));
      const first = checkAtOnce(client, callers(0));
      await until(() => held.length === 2, "the first batch's two requests");
      const second = checkAtOnce(client, callers(100));
      await until(() => held.length === 3, "the second batch's request");
      // The first batch split in two by caller, the second (no request free to go) sent whole.
      expect(held[0]!.size + held[1]!.size).toBe(32);
      expect(held[2]!.size).toBe(32);
      for (const request of held) request.release();
      await Promise.all([first, second]);
      // Nothing in flight again: the next batch is split as before.
      const third = checkAtOnce(client, callers(200));
      await until(() => held.length === 5, "the third batch's two requests");
      for (const request of held.slice(3)) request.release();
      expect((await third).every((d) => d.allowed)).toBe(true);
      expect(client.stats()).toMatchObject({ batches: 5, decisions: { network: 96 } });
    });

    it("sends the checks the callers of an answer make at once, not when the event loop turns: requests in flight stay staggered", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 10);
      // Each answer comes back whole, then the loop's next turn is marked: a check sent only when the loop turns comes after the mark.
      const seen: string[] = [];
      const markingFetch: FetchFunction = async (input, init) => {
        seen.push(`request of ${(JSON.parse(init.body) as { variables: { requests: unknown[] } }).variables.requests.length}`);
        const answer = await fetch(input, init);
        const text = await answer.text();
        setImmediate(() => seen.push("turn"));
        return { status: answer.status, text: async () => text };
      };
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: markingFetch }));
      await Promise.all(
        ["u1", "u2", "u3"].map(async (userId) => {
          await client.check({ tenantId, userId });
          await client.check({ tenantId, userId });
        }),
      );
      expect(seen.slice(0, 2)).toEqual(["request of 3", "request of 3"]);
      // With batch.maxWaitMs the batch waits as it was asked to.
      const waiting = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, fetch: markingFetch, batch: { maxWaitMs: 5 } }));
      seen.length = 0;
      await Promise.all(
        ["u1", "u2", "u3"].map(async (userId) => {
          await waiting.check({ tenantId, userId });
          await waiting.check({ tenantId, userId });
        }),
      );
      expect(seen.slice(0, 3)).toEqual(["request of 3", "turn", "request of 3"]);
    });

    it("keeps a batch of fewer than 16 checks, or of one caller's, to one request", async () => {
      const tenantId = newTenant();
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false }));
      await client.checkMany(Array.from({ length: 15 }, (_, i) => ({ tenantId, userId: `u${i}` })));
      await client.checkMany(Array.from({ length: 40 }, () => ({ tenantId, userId: "one" })));
      expect(client.stats()).toMatchObject({ batches: 2, decisions: { network: 55 } });
    });

    it("closes a batch at batch.maxSize", async () => {
      const tenantId = newTenant();
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false, batch: { maxSize: 16, parallel: 1 } }));
      await client.checkMany(Array.from({ length: 40 }, (_, i) => ({ tenantId, userId: `u${i}` })));
      expect(client.stats()).toMatchObject({ batches: 3, decisions: { network: 40 } });
    });

    it("keeps a batch to one tenant", async () => {
      const [a, b] = [newTenant(), newTenant()];
      const client = track(patientClient(suite.t.app.url, suite.t.adminToken, { cache: false }));
      await Promise.all([client.check({ tenantId: a }), client.check({ tenantId: b }), client.check({ tenantId: a })]);
      expect(client.stats()).toMatchObject({ batches: 2, meanBatchSize: 1.5 });
    });

    it("fails only the check with bad input, naming its field, and counts each other check once", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 10);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId), { cache: false }));
      const outcomes = await Promise.allSettled([0, 1, 2, 3, 4].map((i) => client.check({ tenantId, userId: "u1", ip: i === 2 ? "not-an-ip" : "10.0.0.1" })));
      const failed = outcomes[2] as PromiseRejectedResult;
      expect(failed.reason).toBeInstanceOf(FloodgateError);
      expect(failed.reason).toMatchObject({ code: "BAD_USER_INPUT", field: "request.ip" });
      expect((failed.reason as Error).message).toMatch(/^request\.ip must be an IPv4 or IPv6 address/);
      expect(outcomes.filter((o) => o.status === "fulfilled").map((o) => (o as PromiseFulfilledResult<FloodgateDecision>).value.remaining)).toEqual([9, 8, 7, 6]);
      // A dry run tells what remains once it is counted: 10 - 4 - 1.
      const after = await client.check({ tenantId, userId: "u1", dryRun: true });
      expect(after.remaining).toBe(5);
      expect(client.stats().callerErrors).toBe(1);
    });

    it("fails only the checks of a tenant the key may not check (FORBIDDEN)", async () => {
      const [own, other] = [newTenant(), newTenant()];
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, own), { cache: false }));
      const [mine, theirs] = await Promise.allSettled([client.check({ tenantId: own }), client.check({ tenantId: other })]);
      expect(mine.status).toBe("fulfilled");
      expect((theirs as PromiseRejectedResult).reason).toMatchObject({ code: "FORBIDDEN" });
    });

    it("fails every check of a batch Floodgate refuses for the caller (an unknown key, a tenant it may not check) in one request, not again one by one", async () => {
      const [own, other] = [newTenant(), newTenant()];
      let requests = 0;
      const counting: FetchFunction = (input, init) => {
        requests++;
        return fetch(input, init);
      };
      const users = Array.from({ length: 6 }, (_, i) => `u${i}`);
      for (const [token, tenantId, code] of [
        [await apiKey(suite.client, own), other, "FORBIDDEN"],
        ["fg_no_such_key_0123456789abcdef", own, "UNAUTHENTICATED"],
      ] as const) {
        requests = 0;
        const client = track(patientClient(suite.t.app.url, token, { cache: false, fetch: counting }));
        const outcomes = await Promise.allSettled(users.map((userId) => client.check({ tenantId, userId })));
        expect(outcomes.map((o) => (o.status === "rejected" ? (o.reason as FloodgateError).code : o.status))).toEqual(users.map(() => code));
        expect([requests, client.stats().callerErrors]).toEqual([1, users.length]);
      }
    });
  });

  describe("the refusal cache", () => {
    /** A client of a new tenant whose one rule is per user, its refusal cache live. */
    async function cachingClientOf(limit: number, extra: Partial<Parameters<typeof createRule>[1]> = {}) {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, limit, extra);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      return { tenantId, rule, client };
    }

    async function refusedOnce(limit = 2) {
      const { tenantId, rule, client } = await cachingClientOf(limit);
      const request = { tenantId, userId: "u1", resource: "/api/orders", method: "POST" };
      for (let i = 0; i < limit; i++) expect((await client.check(request)).allowed).toBe(true);
      const refusal = await client.check(request);
      expect(refusal).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
      return { tenantId, rule, client, request, refusal };
    }

    it("answers a caller hammering over its limit with no request at all, the waits counted down", async () => {
      const { client, request, refusal } = await refusedOnce();
      const batches = client.stats().batches;
      const hammered = await Promise.all(Array.from({ length: 200 }, () => client.check(request)));
      expect(client.stats().batches).toBe(batches);
      expect(client.stats().decisions.refusalCache).toBe(200);
      for (const decision of hammered) {
        expect(decision).toMatchObject({ allowed: false, source: "CLIENT_REFUSAL_CACHE", rule: refusal.rule, remaining: 0 });
        expect(decision.retryAfter).toBeLessThanOrEqual(refusal.retryAfter!);
        expect(header(decision, "Retry-After")).toBe(String(decision.retryAfter));
        expect(header(decision, "X-RateLimit-Limit")).toBe("2");
        expect(header(decision, "RateLimit")).toMatch(/^"per-user-[^"]+";r=0;t=\d+;pk=:[A-Za-z0-9+/]+=*:$/);
        // t counted down like the waits: never past Retry-After (the draft's rule), never above Floodgate's own.
        const t = (d: typeof decision) => Number(/;t=(\d+)/.exec(header(d, "RateLimit")!)![1]);
        expect(t(decision)).toBeLessThanOrEqual(decision.retryAfter!);
        expect(t(decision)).toBeLessThanOrEqual(t(refusal));
      }
      // A larger request is refused as well; the query string does not make another check.
      expect((await client.check({ ...request, cost: 2 })).source).toBe("CLIENT_REFUSAL_CACHE");
      expect((await client.check({ ...request, resource: "/api/orders?page=2" })).source).toBe("CLIENT_REFUSAL_CACHE");
    });

    it("remembers a refusal for Floodgate's wait to the millisecond: a token bucket's next token is asked for, not refused for the rest of Retry-After's second", async () => {
      // Four a second, one at a time: a token every 250 ms.
      const { tenantId, client } = await cachingClientOf(4, { algorithm: "TOKEN_BUCKET", windowUnit: "SECONDS", burst: 1 });
      const request = { tenantId, userId: "u1" };
      // Until refused: on a loaded machine a token may come back between two checks.
      let refusal = await client.check(request);
      for (let i = 0; i < 20 && refusal.allowed; i++) refusal = await client.check(request);
      expect(refusal).toMatchObject({ allowed: false, source: "COUNTER_STORE", retryAfter: 1 });
      expect(refusal.retryAfterMs).toBeGreaterThan(0);
      expect(refusal.retryAfterMs).toBeLessThanOrEqual(250);
      expect(await client.check(request)).toMatchObject({ allowed: false, source: "CLIENT_REFUSAL_CACHE", retryAfter: 1 });
      await new Promise((resolve) => setTimeout(resolve, refusal.retryAfterMs! + 50));
      expect(await client.check(request)).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    });

    it("gives and remembers a wait past GraphQL Int's 24.8 days (a 30-day window) to the millisecond", async () => {
      const { tenantId, client } = await cachingClientOf(1, { algorithm: "FIXED_WINDOW", window: 30, windowUnit: "DAYS" });
      const request = { tenantId, userId: "u1" };
      expect((await client.check(request)).allowed).toBe(true);
      const refusal = await client.check(request);
      expect(refusal).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
      expect(refusal.retryAfterMs).toBeGreaterThan(2 ** 31);
      expect(refusal.retryAfter).toBe(Math.ceil(refusal.retryAfterMs! / 1000));
      expect(refusal.results[0]!.retryAfterMs).toBe(refusal.retryAfterMs);
      expect(await client.check(request)).toMatchObject({ allowed: false, source: "CLIENT_REFUSAL_CACHE" });
    });

    it("forgets a refusal at once when its bucket is reset, through any client", async () => {
      const { client, request, rule } = await refusedOnce();
      const admin = track(patientClient(suite.t.app.url, suite.t.adminToken, { cache: false }));
      expect(await admin.resetLimit(rule.id, "user:u1")).toBe(true);
      await until(() => client.stats().refusalCache?.entries === 0, "the reset to reach the client");
      expect(await client.check(request)).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    });

    it("forgets a refusal at once when its rule changes", async () => {
      const { client, request, rule } = await refusedOnce();
      await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { limit: 10 } });
      await until(() => client.stats().refusalCache?.entries === 0, "the rule change to reach the client");
      expect(await client.check(request)).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    });

    it("never remembers a refusal no rule made: a lifted ban admits at the next check", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 100);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      const ban = (await suite.client.data(BanDocument, { input: { tenantId, dimension: "USER", value: "u1", durationSeconds: 600 } })).ban;
      for (let i = 0; i < 3; i++) expect(await client.check({ tenantId, userId: "u1" })).toMatchObject({ allowed: false, source: "SCREENING" });
      expect(client.stats()).toMatchObject({ decisions: { refusalCache: 0 }, refusalCache: { entries: 0 } });
      await suite.client.data(UnbanDocument, { id: ban.id });
      expect(await client.check({ tenantId, userId: "u1" })).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    });

    it("remembers refusals only: admissions and dry runs that admit always ask Floodgate", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 100);
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      for (let i = 0; i < 5; i++) await client.check({ tenantId, userId: "u1", dryRun: i % 2 === 0 });
      expect(client.stats()).toMatchObject({ decisions: { network: 5, refusalCache: 0 }, refusalCache: { entries: 0 } });
    });

    it("keeps a refusal to the check's attributes: another plan's check still asks Floodgate", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 1, { when: [{ key: "plan", values: ["free"] }] });
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      const free = { tenantId, userId: "u1", attributes: [{ key: "plan", value: "free" }] };
      expect((await client.check(free)).allowed).toBe(true);
      expect(await client.check(free)).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
      expect((await client.check(free)).source).toBe("CLIENT_REFUSAL_CACHE");
      // No rule applies to these: Floodgate answers (source null), the cache does not.
      expect(await client.check({ ...free, attributes: [{ key: "plan", value: "pro" }] })).toMatchObject({ allowed: true, source: null });
      expect(await client.check({ tenantId, userId: "u1" })).toMatchObject({ allowed: true, source: null });
      expect(client.stats().decisions).toMatchObject({ network: 4, refusalCache: 1 });
    });

    it("serves nothing while its push channel is down, forgets what it had, and is used again once the channel listens again", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 1);
      const port = Number(new URL(suite.t.app.url).port);
      const proxy = await startTcpProxy("127.0.0.1", port);
      cleanups.push(() => proxy.stop());
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { timeoutMs: 500 }));
      await untilCacheLive(client);
      const request = { tenantId, userId: "u1" };
      await client.check(request);
      expect((await client.check(request)).source).toBe("COUNTER_STORE");
      expect(client.stats().refusalCache?.entries).toBe(1);

      await proxy.stop();
      await until(() => client.stats().refusalCache?.live === false, "the channel to go down");
      expect(client.stats().refusalCache?.entries).toBe(0);
      const meanwhile = await client.check(request);
      expect(meanwhile).toMatchObject({ allowed: true, degraded: true, source: "CLIENT_FAILURE_MODE" });

      await proxy.start();
      await untilCacheLive(client);
      // Floodgate's own over-limit cache may answer this one: a refusal from Floodgate all the same.
      const again = await client.check(request);
      expect(again.allowed).toBe(false);
      expect(["COUNTER_STORE", "OVER_LIMIT_CACHE"]).toContain(again.source);
      expect(await client.check(request)).toMatchObject({ allowed: false, source: "CLIENT_REFUSAL_CACHE" });
    });

    it("abandons a push channel connection Floodgate leaves unanswered, and listens once Floodgate answers", async () => {
      const tenantId = newTenant();
      const port = Number(new URL(suite.t.app.url).port);
      const proxy = await startTcpProxy("127.0.0.1", port);
      cleanups.push(() => proxy.stop());
      proxy.answer(false);
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId)));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(client.stats().refusalCache?.live).toBe(false);
      proxy.answer(true);
      // The held connection is given up CONNECT_TIMEOUT_MS after it began, and the next one is answered.
      await until(() => client.stats().refusalCache?.live === true, "the push channel to listen", CONNECT_TIMEOUT_MS + 10_000);
    });
  });

  describe("failure modes", () => {
    it.each([
      ["OPEN", true],
      ["CLOSED", false],
    ] as const)("%s decides every check when nothing listens, degraded, and counts the outage", async (failureMode, allowed) => {
      const client = track(patientClient(await refusingUrl(), "any-token", { failureMode, cache: false }));
      const decisions = await client.checkMany([{ tenantId: "acme" }, { tenantId: "acme", userId: "u1" }]);
      for (const decision of decisions) {
        expect(decision).toMatchObject({ allowed, degraded: true, source: "CLIENT_FAILURE_MODE", rule: null, results: [] });
        expect(decision.headers).toEqual(allowed ? [] : [{ name: "Retry-After", value: "1" }]);
      }
      expect(client.stats()).toMatchObject({ decisions: { failureMode: 2, network: 0 }, outages: { unreachable: 1 } });
    });

    it("decides by failure mode at the deadline when Floodgate accepts and never answers", async () => {
      const silent = await silentServer();
      cleanups.push(() => silent.close());
      const client = track(new FloodgateClient({ url: silent.url, token: "any-token", timeoutMs: 200, failureMode: "CLOSED", cache: false }));
      const started = performance.now();
      const decision = await client.check({ tenantId: "acme" });
      console.log(`a check to a silent Floodgate was decided after ${(performance.now() - started).toFixed(0)} ms (deadline 200 ms)`);
      expect(decision).toMatchObject({ allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" });
      expect(client.stats().outages).toEqual({ timeouts: 1, unreachable: 0, serverErrors: 0 });
    });

    it("decides at the deadline a request still waiting for a connection", async () => {
      const silent = await silentServer();
      cleanups.push(() => silent.close());
      // One connection, two tenants' batches at once: the second request waits behind the first, which is never answered.
      const client = track(new FloodgateClient({ url: silent.url, token: "any-token", timeoutMs: 200, connections: 1, failureMode: "CLOSED", cache: false }));
      const decisions = await client.checkMany([{ tenantId: "acme" }, { tenantId: "globex" }]);
      expect(decisions).toMatchObject([
        { allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" },
        { allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" },
      ]);
      expect(client.stats()).toMatchObject({ batches: 2, outages: { timeouts: 2, unreachable: 0, serverErrors: 0 } });
    });

    it("treats a 5xx as an outage", async () => {
      const failing = createServer((_, res) => res.writeHead(503, { "content-type": "text/html" }).end("<h1>down</h1>"));
      await new Promise<void>((resolve) => failing.listen(0, "127.0.0.1", resolve));
      cleanups.push(() => new Promise((resolve) => failing.close(() => resolve())));
      const { port } = failing.address() as { port: number };
      const client = track(patientClient(`http://127.0.0.1:${port}/graphql`, "any-token", { cache: false }));
      expect(await client.check({ tenantId: "acme" })).toMatchObject({ allowed: true, degraded: true });
      expect(client.stats().outages.serverErrors).toBe(1);
    });

    it("LOCAL decides with the rules it last saw, with Floodgate's arithmetic, on counters of its own", async () => {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, 3, { algorithm: "SLIDING_WINDOW_LOG", resource: "/api/**" });
      const proxy = await startTcpProxy("127.0.0.1", Number(new URL(suite.t.app.url).port));
      cleanups.push(() => proxy.stop());
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { failureMode: "LOCAL", cache: false }));
      expect((await client.check({ tenantId, userId: "u1", resource: "/api/a" })).rule?.id).toBe(rule.id);
      await proxy.stop();

      const local = [];
      for (let i = 0; i < 4; i++) local.push(await client.check({ tenantId, userId: "u2", resource: "/api/b" }));
      expect(local.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(local.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
      const refused = local[3]!;
      expect(refused).toMatchObject({ degraded: true, source: "CLIENT_FAILURE_MODE", rule: { id: rule.id }, action: "REJECT", limit: 3, retryAfter: 3600 });
      expect(refused.results.map((r) => [r.rule.id, r.key, r.allowed])).toEqual([[rule.id, "user:u2", false]]);
      expect(refused.headers).toEqual([{ name: "Retry-After", value: "3600" }]);
      // Outside the rule's glob nothing applies; invalid input is still the caller's fault.
      expect(await client.check({ tenantId, userId: "u2", resource: "/other" })).toMatchObject({ allowed: true, rule: null, degraded: true });
      await expect(client.check({ tenantId, ip: "nope" })).rejects.toMatchObject({ code: "BAD_USER_INPUT", field: "request.ip" });
    });
    it("LOCAL compares a path that ignores letter case as Floodgate does: every spelling under the rule, in one ENDPOINT bucket", async () => {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, 1, { scope: ["ENDPOINT"], resource: "/api/Orders/**" });
      const proxy = await startTcpProxy("127.0.0.1", Number(new URL(suite.t.app.url).port));
      cleanups.push(() => proxy.stop());
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { failureMode: "LOCAL", cache: false }));
      const online = await client.check({ tenantId, resource: "/API/ORDERS/0", ignorePathCase: true });
      expect(online).toMatchObject({ allowed: true, degraded: false, rule: { id: rule.id } });
      expect(online.results[0]?.key).toContain("/api/orders/0");
      await proxy.stop();

      expect(await client.check({ tenantId, resource: "/API/orders/1", ignorePathCase: true })).toMatchObject({ allowed: true, degraded: true, rule: { id: rule.id } });
      expect(await client.check({ tenantId, resource: "/api/ORDERS/1", ignorePathCase: true })).toMatchObject({ allowed: false, degraded: true, rule: { id: rule.id } });
      // Spelt case by case, only "/api/Orders/..." is under the rule.
      expect(await client.check({ tenantId, resource: "/api/orders/1" })).toMatchObject({ allowed: true, degraded: true, rule: null });
      expect(await client.check({ tenantId, resource: "/api/Orders/1" })).toMatchObject({ allowed: true, degraded: true, rule: { id: rule.id } });
    });

    it("LOCAL applies a rule's conditions and attribute keys as Floodgate does", async () => {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, 1, { scope: [], attributeKeys: ["customer"], when: [{ key: "plan", values: ["free"] }] });
      const proxy = await startTcpProxy("127.0.0.1", Number(new URL(suite.t.app.url).port));
      cleanups.push(() => proxy.stop());
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { failureMode: "LOCAL", cache: false }));
      const of = (plan: string, customer: string) => ({ tenantId, attributes: [{ key: "plan", value: plan }, { key: "customer", value: customer }] });
      expect((await client.check(of("free", "c0"))).rule?.id).toBe(rule.id);
      await proxy.stop();

      expect(await client.check(of("free", "c1"))).toMatchObject({ allowed: true, degraded: true, results: [{ key: "attr.customer:c1" }] });
      expect(await client.check(of("free", "c1"))).toMatchObject({ allowed: false, degraded: true });
      expect(await client.check(of("free", "c2"))).toMatchObject({ allowed: true, results: [{ key: "attr.customer:c2" }] });
      expect(await client.check(of("pro", "c1"))).toMatchObject({ allowed: true, rule: null });
    });

    it("LOCAL gives a bucket the limit of the override its decisions named, until the override ends", async () => {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, 2);
      const endsAtMs = Date.now() + 4_000;
      for (const [identifier, limit, expiresAt] of [["vip", 5, null], ["abuser", 1, null], ["trial", 5, new Date(endsAtMs).toISOString()]] as const) {
        await suite.client.data(SetOverrideDocument, { input: { ruleId: rule.id, dimension: "USER", identifier, limit, expiresAt } });
      }
      const proxy = await startTcpProxy("127.0.0.1", Number(new URL(suite.t.app.url).port));
      cleanups.push(() => proxy.stop());
      const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { failureMode: "LOCAL", cache: false }));
      const online = [];
      for (const userId of ["vip", "abuser", "trial", "plain"]) online.push((await client.check({ tenantId, userId })).results[0]?.override?.limit ?? null);
      expect(online).toEqual([5, 1, 5, null]);
      await proxy.stop();

      const local = async (userId: string, times: number) => {
        const decisions: FloodgateDecision[] = [];
        for (let i = 0; i < times; i++) decisions.push(await client.check({ tenantId, userId }));
        expect(decisions.every((d) => d.source === "CLIENT_FAILURE_MODE"), userId).toBe(true);
        return decisions;
      };
      const vip = await local("vip", 6);
      expect(vip.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
      expect(vip[5]!).toMatchObject({ limit: 5, results: [{ override: { limit: 5 } }] });
      expect((await local("abuser", 2)).map((d) => d.allowed)).toEqual([true, false]);
      expect((await local("plain", 3)).map((d) => [d.allowed, d.limit])).toEqual([[true, 2], [true, 2], [false, 2]]);
      // The trial's override has ended: its bucket has the rule's own limit again.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, endsAtMs - Date.now() + 50)));
      const trial = await local("trial", 3);
      expect(trial.map((d) => [d.allowed, d.limit, d.results[0]!.override])).toEqual([[true, 2, null], [true, 2, null], [false, 2, null]]);
    });
  });

  describe("CONCURRENCY leases", () => {
    it("hands back the decision's lease, releases it with releaseLease, and never remembers a CONCURRENCY refusal", async () => {
      const tenantId = newTenant();
      await perUser(tenantId, 1, { algorithm: "CONCURRENCY" });
      const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      const request = { tenantId, userId: "u1" };
      const admitted = await client.check(request);
      expect(admitted.allowed).toBe(true);
      expect(admitted.lease?.id).toEqual(expect.any(String));
      for (let i = 0; i < 3; i++) expect(await client.check(request)).toMatchObject({ allowed: false, source: "COUNTER_STORE", lease: null });
      expect(client.stats().refusalCache?.entries).toBe(0);
      expect(await client.releaseLease(admitted.lease!.id)).toBe(true);
      expect(await client.releaseLease(admitted.lease!.id)).toBe(false);
      expect((await client.check(request)).allowed).toBe(true);
      await expect(client.releaseLease("not a lease")).rejects.toMatchObject({ code: "BAD_USER_INPUT" });
      const down = track(patientClient(await refusingUrl(), "any-token", { cache: false }));
      await expect(down.releaseLease(admitted.lease!.id)).rejects.toMatchObject({ code: "UNAVAILABLE" });
    });
  });

  describe("resetLimit", () => {
    it("resets a bucket through Floodgate, and throws UNAVAILABLE when Floodgate cannot be asked", async () => {
      const tenantId = newTenant();
      const rule = await perUser(tenantId, 1);
      const client = track(patientClient(suite.t.app.url, suite.t.adminToken));
      await client.check({ tenantId, userId: "u1" });
      expect((await client.check({ tenantId, userId: "u1" })).allowed).toBe(false);
      expect(await client.resetLimit(rule.id, "user:u1")).toBe(true);
      expect((await client.check({ tenantId, userId: "u1" })).allowed).toBe(true);
      await expect(client.resetLimit(randomUUID(), "user:u1")).rejects.toMatchObject({ code: "NOT_FOUND" });
      const down = track(patientClient(await refusingUrl(), "any-token", { cache: false }));
      await expect(down.resetLimit(rule.id, "user:u1")).rejects.toMatchObject({ code: "UNAVAILABLE" });
    });
  });
});

describe("FloodgateClient options", () => {
  it.each([
    [{ url: "ftp://x/graphql" }, "options.url must be an http(s) URL"],
    [{ token: " " }, "options.token must be an API key's secret"],
    [{ timeoutMs: 0 }, "options.timeoutMs must be an integer from 1 to 600000 (got 0)"],
    [{ failureMode: "SOMETIMES" }, 'options.failureMode must be OPEN, CLOSED or LOCAL (got "SOMETIMES")'],
    [{ batch: { maxSize: 1001 } }, "options.batch.maxSize must be an integer from 1 to 1000 (got 1001)"],
    [{ batch: { maxWaitMs: -1 } }, "options.batch.maxWaitMs must be an integer from 0 to 60000 (got -1)"],
    // A batch waiting out its checks' deadline would never be sent: every check decided by the failure mode.
    [{ batch: { maxWaitMs: 100 } }, "options.batch.maxWaitMs must be less than timeoutMs (100): a batch waits out of its checks' deadline (got 100)"],
    [{ timeoutMs: 200, batch: { maxWaitMs: 30_000 } }, "options.batch.maxWaitMs must be less than timeoutMs (200)"],
    [{ batch: { parallel: 0 } }, "options.batch.parallel must be an integer from 1 to 64 (got 0)"],
    [{ cache: { maxEntries: 0 } }, "options.cache.maxEntries must be an integer from 1 to 10000000 (got 0)"],
  ])("refuses %j, naming the option", (bad, message) => {
    expect(() => new FloodgateClient({ url: "http://127.0.0.1:1/graphql", token: "t", ...(bad as object) })).toThrow(message);
  });

  it("refuses checks once closed", async () => {
    const client = new FloodgateClient({ url: "http://127.0.0.1:1/graphql", token: "t", cache: false });
    await client.close();
    await expect(client.check({ tenantId: "acme" })).rejects.toMatchObject({ code: "CLIENT_CLOSED" });
  });
});

describe("FloodgateClient close()", () => {
  it("succeeds while Floodgate is unreachable, its push channel still trying to connect", async () => {
    const client = new FloodgateClient({ url: await refusingUrl(), token: "t" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await expect(client.close()).resolves.toBeUndefined();
  });

  it("returns at once while its push channel waits to connect again, and the channel tries no more", async () => {
    const floodgate = await hangingUpServer();
    try {
      const client = new FloodgateClient({ url: floodgate.url, token: "t" });
      // The channel connects at once, then again 250, 500, 1,000 and 2,000 ms after each failure: after the fifth it waits 5 s.
      await until(() => floodgate.connections() === 5, "the push channel's fifth attempt", 20_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = performance.now();
      await client.close();
      expect(performance.now() - started).toBeLessThan(1_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(floodgate.connections()).toBe(5);
    } finally {
      await floodgate.close();
    }
  });

  it("returns at once while its push channel's connection waits for an answer that never comes", async () => {
    const silent = await silentServer();
    try {
      const client = new FloodgateClient({ url: silent.url, token: "t" });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const started = performance.now();
      await client.close();
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await silent.close();
    }
  });
});

describe("FloodgateClient close() with checks in flight", () => {
  it("waits for the checks already sent, at every call of close(): each resolves with a decision", async () => {
    const silent = await silentServer();
    try {
      // Over fetch, whose transport has nothing of its own to wait for.
      const client = new FloodgateClient({ url: silent.url, token: "t", timeoutMs: 300, cache: false, fetch: globalThis.fetch });
      const pending = client.check({ tenantId: "acme" });
      await new Promise((resolve) => setTimeout(resolve, 50));
      let settledBeforeClose = false;
      void pending.then(() => (settledBeforeClose = true));
      // Two parts of a program shutting down, each awaiting close(): the second must not return first.
      const firstClose = client.close();
      await client.close();
      expect(settledBeforeClose).toBe(true);
      await firstClose;
      expect(await pending).toMatchObject({ allowed: true, degraded: true, source: "CLIENT_FAILURE_MODE" });
    } finally {
      await silent.close();
    }
  });
});
