/**
 * The refusal cache on its own clock: what a remembered refusal says as time
 * passes, and which checks are the same check. client.test.ts covers it
 * against a real Floodgate (learning, invalidation, the push channel).
 */

import { describe, expect, it } from "vitest";
import type { FloodgateDecision } from "../../src/client/decision.js";
import type { CheckLimitsInput, ClientRuleFragment } from "../../src/client/generated/operations.js";
import { RefusalCache } from "../../src/client/refusal-cache.js";

const SENT_AT_MS = Date.parse("2026-12-05T12:00:00.000Z");

const rule: ClientRuleFragment = {
  id: "rule-1",
  tenantId: "acme",
  name: "per-user",
  scope: ["USER"],
  attributeKeys: [],
  when: [],
  resource: null,
  method: null,
  algorithm: "FIXED_WINDOW",
  limit: 2,
  window: 60,
  windowUnit: "SECONDS",
  calendar: null,
  burst: null,
  action: "REJECT",
  failureMode: "OPEN",
  priority: 0,
  enabled: true,
  version: 1,
};

/** Floodgate's refusal of a check sent at SENT_AT_MS: wait 30 s. */
const refusal: FloodgateDecision = {
  allowed: false,
  degraded: false,
  decidedAt: new Date(SENT_AT_MS).toISOString(),
  source: "COUNTER_STORE",
  action: "REJECT",
  limit: 2,
  remaining: 0,
  resetAt: new Date(SENT_AT_MS + 30_000).toISOString(),
  retryAfter: 30,
  retryAfterMs: 30_000,
  delayMs: null,
  nearLimit: true,
  rule,
  results: [{ rule, key: "user:u1", override: null, allowed: false, limit: 2, remaining: 0, resetAt: new Date(SENT_AT_MS + 30_000).toISOString(), retryAfter: 30, retryAfterMs: 30_000, delayMs: 0, consulted: true, nearLimit: true }],
  headers: [
    { name: "X-RateLimit-Limit", value: "2" },
    { name: "Retry-After", value: "30" },
    { name: "RateLimit", value: '"per-user";r=0;t=30;pk=:AAAA:' },
  ],
  reason: null,
  lease: null,
};

const check: CheckLimitsInput = { tenantId: "acme", userId: "u1", resource: "/api/orders", method: "POST" };

function cacheHolding(request: CheckLimitsInput = check): RefusalCache {
  const cache = new RefusalCache(100);
  cache.setLive(true);
  cache.learn(request, refusal, SENT_AT_MS, cache.mark());
  return cache;
}

const header = (decision: FloodgateDecision | null, name: string) => decision?.headers.find((h) => h.name === name)?.value;

describe("RefusalCache", () => {
  it("counts the waits down to the millisecond it is asked at", () => {
    const cache = cacheHolding();
    const later = cache.refusal(check, SENT_AT_MS + 12_400);
    expect(later).toMatchObject({ allowed: false, source: "CLIENT_REFUSAL_CACHE", decidedAt: "2026-12-05T12:00:12.400Z", retryAfter: 18, retryAfterMs: 17_600 });
    expect(later!.results[0]).toMatchObject({ retryAfter: 18, retryAfterMs: 17_600 });
    expect(header(later, "Retry-After")).toBe("18");
    expect(header(later, "RateLimit")).toBe('"per-user";r=0;t=18;pk=:AAAA:');
    expect(header(later, "X-RateLimit-Limit")).toBe("2");
    expect(cache.refusal(check, SENT_AT_MS + 30_000)).toBeNull();
  });

  it("ends a refusal when Floodgate's wait in milliseconds ends, not at Retry-After's whole second", () => {
    // A token bucket's next token in 150 ms: Retry-After can only say 1.
    const shortWait: FloodgateDecision = {
      ...refusal,
      retryAfter: 1,
      retryAfterMs: 150,
      results: [{ ...refusal.results[0]!, retryAfter: 1, retryAfterMs: 150 }],
      headers: [{ name: "Retry-After", value: "1" }],
    };
    const cache = new RefusalCache(100);
    cache.setLive(true);
    cache.learn(check, shortWait, SENT_AT_MS, cache.mark());
    const later = cache.refusal(check, SENT_AT_MS + 100);
    expect(later).toMatchObject({ source: "CLIENT_REFUSAL_CACHE", retryAfter: 1, retryAfterMs: 50 });
    expect(later!.results[0]).toMatchObject({ retryAfter: 1, retryAfterMs: 50 });
    expect(header(later, "Retry-After")).toBe("1");
    expect(cache.refusal(check, SENT_AT_MS + 149)).toMatchObject({ retryAfterMs: 1 });
    expect(cache.refusal(check, SENT_AT_MS + 150)).toBeNull();
  });

  it("gives each check of one millisecond a decision of its own, and the next millisecond's its own time", () => {
    const cache = cacheHolding();
    const first = cache.refusal(check, SENT_AT_MS + 5_000)!;
    const second = cache.refusal(check, SENT_AT_MS + 5_000)!;
    expect(second).toEqual(first);
    expect(second).not.toBe(first);
    first.retryAfter = 0;
    expect(cache.refusal(check, SENT_AT_MS + 5_000)!.retryAfter).toBe(25);
    const next = cache.refusal(check, SENT_AT_MS + 5_001)!;
    expect(next.decidedAt).toBe("2026-12-05T12:00:05.001Z");
    expect(cache.refusal(check, SENT_AT_MS + 6_001)).toMatchObject({ decidedAt: "2026-12-05T12:00:06.001Z", retryAfter: 24 });
  });

  it("takes a check without its path's query or fragment, its method in any case, its attributes in any order, as the same check", () => {
    const withAttributes = { ...check, attributes: [{ key: "plan", value: "free" }, { key: "region", value: "eu" }] };
    const cache = cacheHolding(withAttributes);
    const at = SENT_AT_MS + 1_000;
    const same = [
      { ...withAttributes, resource: "/api/orders?page=2" },
      { ...withAttributes, resource: "/api/orders#top" },
      { ...withAttributes, resource: "/api/orders#a?b" },
      { ...withAttributes, method: "post" },
      { ...withAttributes, attributes: [...withAttributes.attributes].reverse() },
    ];
    for (const request of same) expect(cache.refusal(request, at), JSON.stringify(request)).not.toBeNull();
    const other = [
      check,
      { ...withAttributes, resource: "/api/orders/1" },
      { ...withAttributes, method: "GET" },
      { ...withAttributes, cookie: "session=1" },
      { ...withAttributes, userAgent: "curl/8" },
      { ...withAttributes, ip: "10.0.0.1" },
      { ...withAttributes, apiKey: "k" },
      { ...withAttributes, userId: "u2" },
      { ...withAttributes, tenantId: "other" },
      { ...withAttributes, attributes: [{ key: "plan", value: "free" }] },
    ];
    for (const request of other) expect(cache.refusal(request, at), JSON.stringify(request)).toBeNull();
  });

  it("takes every spelling of a path as one check when the check ignores letter case, and none as the check that does not", () => {
    const ignoring = { ...check, resource: "/API/Orders", ignorePathCase: true };
    const cache = cacheHolding(ignoring);
    const at = SENT_AT_MS + 1_000;
    for (const resource of ["/API/Orders", "/api/orders", "/Api/ORDERS?x=1"]) expect(cache.refusal({ ...ignoring, resource }, at), resource).not.toBeNull();
    // "İ" folds to two characters: a rule may match such a path as spelt and not its twins, so it is its own check.
    const dotted = cacheHolding({ ...ignoring, resource: "/files/İ" });
    expect(dotted.refusal({ ...ignoring, resource: "/files/İ" }, at)).not.toBeNull();
    for (const resource of ["/files/i\u0307", "/FILES/İ"]) expect(dotted.refusal({ ...ignoring, resource }, at), resource).toBeNull();
    // Floodgate matches rules against these by their spelling: the refusal of the folded path says nothing of them.
    for (const request of [{ ...ignoring, ignorePathCase: false }, { ...ignoring, ignorePathCase: null }, { ...ignoring, resource: "/api/orders", ignorePathCase: undefined }]) {
      expect(cache.refusal(request, at), JSON.stringify(request)).toBeNull();
    }
  });

  it("forgets a tenant's refusals when its allow list gains an entry, and every tenant's for \"*\"'s", () => {
    const other = { ...check, tenantId: "globex" };
    const cache = cacheHolding();
    cache.learn(other, refusal, SENT_AT_MS, cache.mark());
    const at = SENT_AT_MS + 1_000;
    cache.forgetTenant("globex");
    expect([cache.refusal(check, at) !== null, cache.refusal(other, at) !== null]).toEqual([true, false]);
    cache.learn(other, refusal, SENT_AT_MS, cache.mark());
    cache.forgetTenant("*");
    expect([cache.refusal(check, at), cache.refusal(other, at)]).toEqual([null, null]);
  });

  it("refuses a costlier check too, but not a cheaper one", () => {
    const cache = new RefusalCache(100);
    cache.setLive(true);
    cache.learn({ ...check, cost: 3 }, refusal, SENT_AT_MS, cache.mark());
    expect(cache.refusal({ ...check, cost: 4 }, SENT_AT_MS + 1)).not.toBeNull();
    expect(cache.refusal({ ...check, cost: 2 }, SENT_AT_MS + 1)).toBeNull();
  });
});
