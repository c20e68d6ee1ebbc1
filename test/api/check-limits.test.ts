/** checkLimits through HTTP: which rules apply, what they decide, what they consume, and the headers they produce. */

import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { CheckLimitsDocument, DeleteRuleDocument, ResetLimitDocument, UpdateRuleDocument, type CheckLimitsInput } from "../generated/graphql.js";
import { clientFingerprint } from "../../src/domain/bucket-key.js";
import { check, createRule, describeOnEachStorage, expectBadUserInput, expectNoStackTrace, header, newTenant, sleep } from "../support/api.js";

type Decision = Awaited<ReturnType<typeof check>>;

/** What a decision says, without the fields that move with the clock (resetAt, RateLimit's t=). */
function verdict(decision: Decision) {
  return {
    allowed: decision.allowed,
    rule: decision.rule,
    action: decision.action,
    limit: decision.limit,
    remaining: decision.remaining,
    results: decision.results.map((r) => ({ ruleId: r.rule.id, key: r.key, allowed: r.allowed, limit: r.limit, remaining: r.remaining })),
    rateLimitHeaders: ["X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy"].map((name) => header(decision.headers, name)),
  };
}

await describeOnEachStorage("checkLimits over HTTP", (suite) => {
  /** What `count` checks of one request decide, made one after another. */
  async function checksInTurn(request: CheckLimitsInput, count: number): Promise<Decision[]> {
    const decisions: Decision[] = [];
    for (let i = 0; i < count; i++) decisions.push(await check(suite.client, request));
    return decisions;
  }

  describe("the acceptance scenario: 5 per minute per user and 100 per minute per IP", () => {
    let tenantId: string;
    let perUser: Awaited<ReturnType<typeof createRule>>;
    let perIp: Awaited<ReturnType<typeof createRule>>;
    let allowedRuns: Decision[];
    let denied: Decision;
    let requestedAtSeconds: number;
    let answeredAtSeconds: number;

    beforeAll(async () => {
      tenantId = newTenant();
      perUser = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
      perIp = await createRule(suite.client, { tenantId, name: "per-ip", scope: ["IP"], limit: 100, window: 1, windowUnit: "MINUTES" });
      const u1 = { tenantId, userId: "u1", ip: "10.0.0.1" };
      allowedRuns = await checksInTurn(u1, 5);
      requestedAtSeconds = Date.now() / 1000;
      denied = await check(suite.client, u1);
      answeredAtSeconds = Date.now() / 1000;
    });

    it("allows u1 five times with remaining 4, 3, 2, 1, 0", () => {
      expect(allowedRuns.map((d) => d.allowed)).toEqual([true, true, true, true, true]);
      expect(allowedRuns.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
      expect(allowedRuns.every((d) => d.rule?.id === perUser.id)).toBe(true);
    });

    it("says nearLimit on the fifth request only, whose remaining 0 is under 10% of the limit 5, and not on the denial", () => {
      expect(allowedRuns.map((d) => d.nearLimit)).toEqual([false, false, false, false, true]);
      expect(allowedRuns.map((d) => d.results.find((r) => r.rule.id === perUser.id)?.nearLimit)).toEqual([false, false, false, false, true]);
      expect(denied.nearLimit).toBe(false);
      expect(denied.results.map((r) => r.nearLimit)).toEqual([false, false]);
    });

    it("gives the same headers in headerLines, as Name: value lines joined by line feeds, allowed or denied", () => {
      for (const decision of [...allowedRuns, denied]) expect(decision.headerLines).toBe(decision.headers.map((h) => `${h.name}: ${h.value}`).join("\n"));
      expect(denied.headerLines).toMatch(/^X-RateLimit-Limit: 5\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: \d+\nRetry-After: \d+\nRateLimit-Policy: "per-user";q=5;w=60;pk=:[^\n]+\nRateLimit: "per-user";r=0;t=\d+;pk=:[^\n]+$/);
    });

    it("denies the sixth request of u1, decided by the per-user rule, with retryAfter > 0", () => {
      expect(denied.allowed).toBe(false);
      expect(denied.rule?.id).toBe(perUser.id);
      expect(denied.action).toBe("REJECT");
      expect(denied.limit).toBe(5);
      expect(denied.remaining).toBe(0);
      expect(denied.retryAfter).toBeGreaterThan(0);
    });

    it("puts Retry-After and the X-RateLimit headers of the per-user rule on the denial", () => {
      expect(Number(header(denied.headers, "Retry-After"))).toBe(denied.retryAfter);
      expect(header(denied.headers, "X-RateLimit-Limit")).toBe("5");
      expect(header(denied.headers, "X-RateLimit-Remaining")).toBe("0");
      const reset = header(denied.headers, "X-RateLimit-Reset");
      expect(reset).toMatch(/^\d+$/);
      expect(Number(reset)).toBeGreaterThan(requestedAtSeconds);
      expect(Number(reset)).toBeLessThanOrEqual(Math.ceil(answeredAtSeconds) + 120);
    });

    it("puts RateLimit-Policy and RateLimit items of the per-user rule on the denial", () => {
      expect(header(denied.headers, "RateLimit-Policy")).toContain('"per-user";q=5;w=60');
      expect(header(denied.headers, "RateLimit-Policy")).toContain('"per-ip";q=100;w=60');
      expect(header(denied.headers, "RateLimit")).toMatch(/"per-user";r=0;t=\d+/);
    });

    it("shows the per-IP rule with remaining 95 on the denied request: the denial consumed nothing", () => {
      const ip = denied.results.find((r) => r.rule.id === perIp.id);
      expect(ip).toMatchObject({ key: "ip:10.0.0.1", allowed: true, limit: 100, remaining: 95 });
      expect(denied.results.map((r) => r.rule.id)).toEqual([perUser.id, perIp.id]);
    });

    it("still allows u2 from the same IP", async () => {
      const u2 = await check(suite.client, { tenantId, userId: "u2", ip: "10.0.0.1" });
      expect(u2.allowed).toBe(true);
      expect(u2.results.find((r) => r.rule.id === perUser.id)).toMatchObject({ key: "user:u2", remaining: 4 });
    });
  });

  it("allows, denies, then allows again once a 1-second fixed window has passed", async () => {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "tiny", algorithm: "FIXED_WINDOW", limit: 2, window: 1, windowUnit: "SECONDS" });
    // The three checks must fall into one aligned window: do not start in its last 100 ms.
    if (Date.now() % 1000 > 900) await sleep(1000 - (Date.now() % 1000));
    const first = await check(suite.client, { tenantId });
    const second = await check(suite.client, { tenantId });
    const third = await check(suite.client, { tenantId });
    expect([first.allowed, second.allowed, third.allowed]).toEqual([true, true, false]);
    expect(third.resetAt).not.toBeNull();
    await sleep(Math.min(1100, Math.max(0, Date.parse(third.resetAt!) - Date.now()) + 25));
    const later = await check(suite.client, { tenantId });
    expect(later.allowed).toBe(true);
    expect(later.remaining).toBe(1);
  });

  it("admits exactly the limit of many concurrent checks of one user", async () => {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
    const decisions = await Promise.all(Array.from({ length: 20 }, () => check(suite.client, { tenantId, userId: "u1" })));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    expect(decisions.filter((d) => d.allowed).map((d) => d.remaining).sort()).toEqual([0, 1, 2, 3, 4]);
  });

  describe("which rules apply", () => {
    it("a request no rule matches is allowed with rule null, no results and no headers", async () => {
      const decision = await check(suite.client, { tenantId: newTenant(), userId: "u1", resource: "/anything", method: "GET" });
      expect(decision).toMatchObject({ allowed: true, rule: null, action: null, limit: null, remaining: null, retryAfter: null, delayMs: null });
      expect(decision.results).toEqual([]);
      expect(decision.headers).toEqual([]);
      expect(decision.headerLines).toBe("");
    });

    it("a rule keyed by USER does not apply to a request without a userId", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES" });
      const decisions = [await check(suite.client, { tenantId, ip: "10.0.0.1" }), await check(suite.client, { tenantId, ip: "10.0.0.1" })];
      for (const decision of decisions) {
        expect(decision.allowed).toBe(true);
        expect(decision.rule).toBeNull();
        expect(decision.results).toEqual([]);
      }
    });

    it.each([
      ["/api/v1/orders", true],
      ["/api/v1/orders/1", false],
      ["/api/v2/x", false],
    ])('a rule on "/api/v1/*" applies to %s: %s', async (resource, applies) => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "v1", resource: "/api/v1/*", limit: 10, window: 1, windowUnit: "MINUTES" });
      const decision = await check(suite.client, { tenantId, resource, method: "GET" });
      expect(decision.results.map((r) => r.rule.id)).toEqual(applies ? [rule.id] : []);
    });

    it("a resource's query string does not keep a glob from matching", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "v1", resource: "/api/v1/*", limit: 10, window: 1, windowUnit: "MINUTES" });
      const decision = await check(suite.client, { tenantId, resource: "/api/v1/orders?page=2" });
      expect(decision.results.map((r) => r.rule.id)).toEqual([rule.id]);
    });

    it('a rule for method "POST" ignores GET requests', async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "posts", method: "POST", limit: 10, window: 1, windowUnit: "MINUTES" });
      const decision = await check(suite.client, { tenantId, resource: "/api/v1/orders", method: "GET" });
      expect(decision.results).toEqual([]);
    });

    it('a rule for method "POST" applies to POST requests, however the method is spelled', async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "posts", method: "POST", limit: 10, window: 1, windowUnit: "MINUTES" });
      for (const method of ["POST", "post"]) {
        const decision = await check(suite.client, { tenantId, resource: "/api/v1/orders", method });
        expect(decision.results.map((r) => r.rule.id)).toEqual([rule.id]);
      }
    });

    it("a disabled rule does not apply", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "off", limit: 1, window: 1, windowUnit: "MINUTES", enabled: false });
      expect((await check(suite.client, { tenantId })).results).toEqual([]);
    });

    it("a rule of another tenant does not apply", async () => {
      await createRule(suite.client, { tenantId: newTenant(), name: "theirs", limit: 1, window: 1, windowUnit: "MINUTES" });
      expect((await check(suite.client, { tenantId: newTenant() })).results).toEqual([]);
    });

    it("a CLIENT rule counts each cookie apart, and a request without a cookie in the bucket it always had", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-client", scope: ["CLIENT"], limit: 1, window: 1, windowUnit: "MINUTES" });
      const caller = { tenantId, ip: "10.0.0.1", userAgent: "curl/8.0" };
      const first = await check(suite.client, { ...caller, cookie: "session-a" });
      const sameCookie = await check(suite.client, { ...caller, cookie: "session-a" });
      const otherCookie = await check(suite.client, { ...caller, cookie: "session-b" });
      const noCookie = await check(suite.client, caller);
      expect([first.allowed, sameCookie.allowed, otherCookie.allowed, noCookie.allowed]).toEqual([true, false, true, true]);
      const keys = [first, otherCookie, noCookie].map((d) => d.results.find((r) => r.rule.id === rule.id)?.key);
      expect(new Set(keys).size).toBe(3);
      expect(keys.join()).not.toContain("session");
      expect(noCookie.results[0]?.key).toBe(`client:${clientFingerprint({ ip: "10.0.0.1", userAgent: "curl/8.0", apiKey: null })}`);
    });

    it("a deleted rule no longer applies on the very next check", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "gone", limit: 1, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId });
      await suite.client.data(DeleteRuleDocument, { id: rule.id });
      const decision = await check(suite.client, { tenantId });
      expect(decision.allowed).toBe(true);
      expect(decision.results).toEqual([]);
    });
  });

  describe('rules of tenant "*"', () => {
    /**
     * Runs a case with a "*" rule of 1 per minute per user, given the rule and a resource it applies to. Such a rule
     * applies to every tenant of this app, so each one is fenced off under a resource of its own and deleted after its case.
     */
    async function withGlobalRule(use: (rule: Awaited<ReturnType<typeof createRule>>, resource: string) => Promise<void>): Promise<void> {
      const prefix = `/star-${randomUUID()}`;
      const rule = await createRule(suite.client, {
        tenantId: "*",
        name: `global-${randomUUID()}`,
        scope: ["USER"],
        resource: `${prefix}/**`,
        limit: 1,
        window: 1,
        windowUnit: "MINUTES",
      });
      try {
        await use(rule, `${prefix}/x`);
      } finally {
        await suite.client.data(DeleteRuleDocument, { id: rule.id });
      }
    }

    it("apply to every tenant", () =>
      withGlobalRule(async (rule, resource) => {
        for (const tenantId of [newTenant(), newTenant()]) {
          const decision = await check(suite.client, { tenantId, userId: "u1", resource });
          expect(decision.results.map((r) => r.rule.id)).toEqual([rule.id]);
        }
      }));

    it('key their buckets by tenant when scoped ("tenant:<id>|user:u1")', () =>
      withGlobalRule(async (_, resource) => {
        const tenantId = newTenant();
        const decision = await check(suite.client, { tenantId, userId: "u1", resource });
        expect(decision.results[0]?.key).toBe(`tenant:${tenantId}|user:u1`);
      }));

    it("never let tenants share a bucket when scoped: one tenant exhausting it leaves another untouched", () =>
      withGlobalRule(async (_, resource) => {
        const a = newTenant();
        const b = newTenant();
        expect((await check(suite.client, { tenantId: a, userId: "u1", resource })).allowed).toBe(true);
        expect((await check(suite.client, { tenantId: a, userId: "u1", resource })).allowed).toBe(false);
        const other = await check(suite.client, { tenantId: b, userId: "u1", resource });
        expect(other.allowed).toBe(true);
        expect(other.results[0]?.key.startsWith(`tenant:${b}|`)).toBe(true);
      }));
  });

  describe("dryRun", () => {
    it("returns the same decision a real check would return", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 2, window: 1, windowUnit: "MINUTES" });
      const request: CheckLimitsInput = { tenantId, userId: "u1" };
      for (let i = 0; i < 3; i++) {
        const dry = await check(suite.client, { ...request, dryRun: true });
        const real = await check(suite.client, request);
        expect(verdict(dry)).toEqual(verdict(real));
      }
    });

    it("consumes nothing: remaining is the same before and after any number of dry runs", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 3, window: 1, windowUnit: "MINUTES" });
      const request: CheckLimitsInput = { tenantId, userId: "u1" };
      expect((await check(suite.client, request)).remaining).toBe(2);
      for (let i = 0; i < 5; i++) expect((await check(suite.client, { ...request, dryRun: true })).remaining).toBe(1);
      expect((await check(suite.client, request)).remaining).toBe(1);
    });
  });

  describe("cost", () => {
    it("consumes that many units", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "units", limit: 10, window: 1, windowUnit: "MINUTES" });
      expect((await check(suite.client, { tenantId, cost: 3 })).remaining).toBe(7);
      expect((await check(suite.client, { tenantId, cost: 7 })).remaining).toBe(0);
      expect((await check(suite.client, { tenantId, cost: 1 })).allowed).toBe(false);
    });

    it("a request costing more than what remains is denied and consumes nothing", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "units", limit: 10, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId, cost: 8 });
      expect((await check(suite.client, { tenantId, cost: 3 })).allowed).toBe(false);
      expect((await check(suite.client, { tenantId, cost: 2 })).remaining).toBe(0);
    });

    it.each([0, -1, 1_000_001])("cost %s fails with BAD_USER_INPUT naming request.cost", async (cost) => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "units", limit: 10, window: 1, windowUnit: "MINUTES" });
      const response = await suite.client.request(CheckLimitsDocument, { request: { tenantId, cost } });
      expectBadUserInput(response.errors, "request.cost");
      expectNoStackTrace(response);
      expect((await check(suite.client, { tenantId })).remaining).toBe(9);
    });
  });

  describe("changing limits", () => {
    it("resetLimit with the key a result shows makes the next check start fresh", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 2, window: 1, windowUnit: "MINUTES" });
      await checksInTurn({ tenantId, userId: "u1" }, 2);
      const denied = await check(suite.client, { tenantId, userId: "u1" });
      expect(denied.allowed).toBe(false);
      const key = denied.results[0]!.key;
      expect(key).toBe("user:u1");
      expect((await suite.client.data(ResetLimitDocument, { ruleId: rule.id, key })).resetLimit).toBe(true);
      const fresh = await check(suite.client, { tenantId, userId: "u1" });
      expect(fresh.allowed).toBe(true);
      expect(fresh.remaining).toBe(1);
    });

    it("resetLimit forgets only the bucket it names", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId, userId: "u1" });
      await check(suite.client, { tenantId, userId: "u2" });
      await suite.client.data(ResetLimitDocument, { ruleId: rule.id, key: "user:u1" });
      expect((await check(suite.client, { tenantId, userId: "u2" })).allowed).toBe(false);
    });

    it("raising the limit of an exhausted bucket through updateRule lets the very next check through", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 2, window: 1, windowUnit: "MINUTES" });
      await checksInTurn({ tenantId, userId: "u1" }, 2);
      expect((await check(suite.client, { tenantId, userId: "u1" })).allowed).toBe(false);
      await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { limit: 5 } });
      const next = await check(suite.client, { tenantId, userId: "u1" });
      expect(next.allowed).toBe(true);
      expect(next.limit).toBe(5);
      expect(next.remaining).toBe(2);
    });

    it("lowering the limit through updateRule denies on the very next check", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 10, window: 1, windowUnit: "MINUTES" });
      await checksInTurn({ tenantId, userId: "u1" }, 2);
      await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { limit: 2 } });
      expect((await check(suite.client, { tenantId, userId: "u1" })).allowed).toBe(false);
    });
  });

  describe("algorithms created through the API", () => {
    /** A line of `burst` requests that drains one a minute, throttling (delaying) rather than rejecting. */
    function leakyThrottleRule(tenantId: string, burst: number) {
      return createRule(suite.client, { tenantId, name: "leaky", algorithm: "LEAKY_BUCKET", action: "THROTTLE", limit: 1, window: 1, windowUnit: "MINUTES", burst });
    }

    it.each([
      ["SLIDING_WINDOW_COUNTER", "MINUTES"],
      ["FIXED_WINDOW", "HOURS"],
      ["SLIDING_WINDOW_LOG", "MINUTES"],
    ] as const)("%s with limit 3 allows three requests and denies the fourth", async (algorithm, windowUnit) => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "three", algorithm, limit: 3, window: 1, windowUnit });
      expect(rule.algorithm).toBe(algorithm);
      const decisions = await checksInTurn({ tenantId }, 4);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(decisions.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
    });

    it("TOKEN_BUCKET with burst 3 allows 3 at once and denies the fourth", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "tokens", algorithm: "TOKEN_BUCKET", limit: 1, window: 1, windowUnit: "MINUTES", burst: 3 });
      const decisions = await checksInTurn({ tenantId }, 4);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(decisions[0]!.limit).toBe(3);
      expect(decisions[3]!.retryAfter).toBeGreaterThan(0);
    });

    it("LEAKY_BUCKET with THROTTLE admits the first request with delayMs 0 and the next with delayMs > 0", async () => {
      const tenantId = newTenant();
      await leakyThrottleRule(tenantId, 3);
      const first = await check(suite.client, { tenantId });
      const second = await check(suite.client, { tenantId });
      expect(first).toMatchObject({ allowed: true, action: "THROTTLE", delayMs: 0 });
      expect(second.allowed).toBe(true);
      expect(second.delayMs).toBeGreaterThan(0);
    });

    it("LEAKY_BUCKET with THROTTLE denies once the line (burst) is full", async () => {
      const tenantId = newTenant();
      await leakyThrottleRule(tenantId, 2);
      const decisions = await checksInTurn({ tenantId }, 3);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
    });

    it("LOG_ONLY never denies, but its result reports allowed false once over the limit", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "shadow", action: "LOG_ONLY", limit: 1, window: 1, windowUnit: "MINUTES" });
      const decisions = await checksInTurn({ tenantId }, 3);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true]);
      expect(decisions.map((d) => d.results[0]?.allowed)).toEqual([true, false, false]);
      expect(decisions.every((d) => d.results[0]?.rule.id === rule.id)).toBe(true);
    });

    it("LOG_ONLY rules put no X-RateLimit (or RateLimit) headers on the decision", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "shadow", action: "LOG_ONLY", limit: 1, window: 1, windowUnit: "MINUTES" });
      for (let i = 0; i < 2; i++) {
        const decision = await check(suite.client, { tenantId });
        expect(decision.headers.filter((h) => /ratelimit|retry-after/i.test(h.name))).toEqual([]);
      }
    });

    it("a LOG_ONLY rule next to an enforcing one leaves the headers to the enforcing rule", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, { tenantId, name: "shadow", action: "LOG_ONLY", limit: 1, window: 1, windowUnit: "MINUTES" });
      await createRule(suite.client, { tenantId, name: "enforced", limit: 50, window: 1, windowUnit: "MINUTES" });
      await check(suite.client, { tenantId });
      const decision = await check(suite.client, { tenantId });
      expect(decision.allowed).toBe(true);
      expect(header(decision.headers, "X-RateLimit-Limit")).toBe("50");
      expect(header(decision.headers, "RateLimit-Policy")).toMatch(/^"enforced";q=50;w=60;pk=:[A-Za-z0-9+/]+=*:$/);
      expect(header(decision.headers, "RateLimit-Policy")).not.toContain("shadow");
    });
  });
});
