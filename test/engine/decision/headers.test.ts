import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RuleResult } from "../../../src/domain/decision.js";
import type { Rule } from "../../../src/domain/rule.js";
import { compileRule } from "../../../src/engine/decision/compiled-rule.js";
import { partitionKey, rateLimitHeaders, secondsUntil, type ServiceLimit } from "../../../src/engine/decision/headers.js";
import { makeRule } from "../../support/domain-factory.js";

const NOW = 1_700_000_000_000;

interface Enforced {
  result: RuleResult;
  policy: { policyItem: string; key: string };
  limit: ServiceLimit;
}

function enforced(ruleFields: Partial<Rule>, resultFields: Partial<RuleResult> = {}, resetSeconds: number | null = 42): Enforced {
  const compiled = compileRule(makeRule(ruleFields));
  const result: RuleResult = {
    rule: compiled.rule,
    key: "user:u1",
    override: null,
    allowed: true,
    limit: compiled.params.capacity,
    remaining: 3,
    resetAt: new Date(NOW + 42_000),
    retryAfter: null,
    retryAfterMs: null,
    delayMs: 0,
    consulted: true,
    readAt: new Date(NOW),
    nearLimit: false,
    ...resultFields,
  };
  return { result, policy: { policyItem: compiled.policyItem, key: result.key }, limit: { compiled, key: result.key, remaining: result.remaining, resetSeconds } };
}

/** The headers of a decision whose enforcing rules were all read, `items[0]` deciding. */
function headersOf(allowed: boolean, retryAfter: number | null, ...items: Enforced[]) {
  return rateLimitHeaders({ allowed, retryAfter, deciding: items[0]?.result ?? null, policies: items.map((i) => i.policy), limits: items.map((i) => i.limit) });
}

function header(headers: { name: string; value: string }[], name: string): string | undefined {
  return headers.find((h) => h.name === name)?.value;
}

/** The partition key of "user:u1": the first 12 bytes of its SHA-256, as an sf-binary. */
const PK = `:${createHash("sha256").update("user:u1").digest().subarray(0, 12).toString("base64")}:`;

describe("rateLimitHeaders", () => {
  it("returns no headers when no enforcing rule was read", () => {
    expect(headersOf(true, null)).toEqual([]);
    expect(headersOf(false, 5)).toEqual([]);
  });

  it("describes an allowed request exactly", () => {
    const item = enforced({ name: "per-user", limit: 5, window: 60 }, { remaining: 3 });
    expect(headersOf(true, null, item)).toEqual([
      { name: "X-RateLimit-Limit", value: "5" },
      { name: "X-RateLimit-Remaining", value: "3" },
      { name: "X-RateLimit-Reset", value: "1700000042" },
      { name: "RateLimit-Policy", value: `"per-user";q=5;w=60;pk=${PK}` },
      { name: "RateLimit", value: `"per-user";r=3;t=42;pk=${PK}` },
    ]);
  });

  it("describes a denied request exactly, with Retry-After no earlier than t", () => {
    const item = enforced({ name: "per-user", limit: 5, window: 60 }, { allowed: false, remaining: 0, retryAfter: 42 });
    expect(headersOf(false, 42, item)).toEqual([
      { name: "X-RateLimit-Limit", value: "5" },
      { name: "X-RateLimit-Remaining", value: "0" },
      { name: "X-RateLimit-Reset", value: "1700000042" },
      { name: "Retry-After", value: "42" },
      { name: "RateLimit-Policy", value: `"per-user";q=5;w=60;pk=${PK}` },
      { name: "RateLimit", value: `"per-user";r=0;t=42;pk=${PK}` },
    ]);
  });

  it("omits Retry-After when the request is allowed", () => {
    expect(header(headersOf(true, 7, enforced({ name: "p" })), "Retry-After")).toBeUndefined();
  });

  it("omits Retry-After on a denial without a retry time", () => {
    const headers = headersOf(false, null, enforced({ name: "p" }, { allowed: false, remaining: 0 }));
    expect(headers.map((h) => h.name)).not.toContain("Retry-After");
  });

  it("takes Retry-After from the decision, not from the result", () => {
    expect(header(headersOf(false, 30, enforced({ name: "p" }, { allowed: false, remaining: 0, retryAfter: 9 })), "Retry-After")).toBe("30");
  });

  it("takes the X-RateLimit headers from the deciding result", () => {
    const first = enforced({ name: "a", limit: 5 }, { remaining: 1, resetAt: new Date(NOW + 10_000) });
    const second = enforced({ name: "b", limit: 100 }, { remaining: 90, resetAt: new Date(NOW + 60_000) });
    const headers = headersOf(true, null, first, second);
    expect(header(headers, "X-RateLimit-Limit")).toBe("5");
    expect(header(headers, "X-RateLimit-Remaining")).toBe("1");
    expect(header(headers, "X-RateLimit-Reset")).toBe("1700000010");
  });

  it('joins one RateLimit-Policy item per enforcing rule with ", " in the given order', () => {
    const first = enforced({ name: "per-user", limit: 5, window: 60 });
    const second = enforced({ name: "per-ip", limit: 100, window: 1, windowUnit: "HOURS" });
    expect(header(headersOf(true, null, first, second), "RateLimit-Policy")).toBe(`"per-user";q=5;w=60;pk=${PK}, "per-ip";q=100;w=3600;pk=${PK}`);
  });

  it('joins one RateLimit item per service limit with ", " in the given order', () => {
    const first = enforced({ name: "per-user" }, { remaining: 0 }, 42);
    const second = enforced({ name: "per-ip" }, { remaining: 95 }, 5);
    expect(header(headersOf(true, null, first, second), "RateLimit")).toBe(`"per-user";r=0;t=42;pk=${PK}, "per-ip";r=95;t=5;pk=${PK}`);
  });

  it("names every enforcing rule in RateLimit-Policy, and only the read ones in RateLimit", () => {
    const read = enforced({ name: "read" }, { allowed: false, remaining: 0, retryAfter: 9 }, 9);
    const unread = enforced({ name: "unread" });
    const headers = rateLimitHeaders({ allowed: false, retryAfter: 9, deciding: read.result, policies: [unread.policy, read.policy], limits: [read.limit] });
    expect(header(headers, "RateLimit-Policy")).toBe(`"unread";q=5;w=60;pk=${PK}, "read";q=5;w=60;pk=${PK}`);
    expect(header(headers, "RateLimit")).toBe(`"read";r=0;t=9;pk=${PK}`);
  });

  it("leaves RateLimit out when no service limit is known, keeping RateLimit-Policy", () => {
    const item = enforced({ name: "p" });
    const headers = rateLimitHeaders({ allowed: true, retryAfter: null, deciding: item.result, policies: [item.policy], limits: [] });
    expect(headers.map((h) => h.name)).toEqual(["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy"]);
  });

  it("advertises a token or leaky bucket's rate as q per w and its capacity as fg-burst; X-RateLimit-Limit stays the capacity", () => {
    for (const algorithm of ["TOKEN_BUCKET", "LEAKY_BUCKET"] as const) {
      const headers = headersOf(true, null, enforced({ name: "tb", algorithm, limit: 10, burst: 25, window: 1 }));
      expect(header(headers, "X-RateLimit-Limit")).toBe("25");
      expect(header(headers, "RateLimit-Policy")).toBe(`"tb";q=10;w=1;fg-burst=25;pk=${PK}`);
    }
    expect(header(headersOf(true, null, enforced({ name: "tb", algorithm: "TOKEN_BUCKET", limit: 10, window: 1 })), "RateLimit-Policy")).toBe(`"tb";q=10;w=1;fg-burst=10;pk=${PK}`);
  });

  it("rounds X-RateLimit-Reset up to the next whole second", () => {
    expect(header(headersOf(true, null, enforced({ name: "p" }, { resetAt: new Date(NOW + 41_001) })), "X-RateLimit-Reset")).toBe("1700000042");
  });

  it("leaves t out of an item with nothing to make available", () => {
    expect(header(headersOf(true, null, enforced({ name: "p", limit: 10 }, { remaining: 10 }, null)), "RateLimit")).toBe(`"p";r=10;pk=${PK}`);
  });
});

describe("partitionKey", () => {
  it("is the first 12 bytes of the key's SHA-256 as an sf-binary, and differs between keys", () => {
    expect(partitionKey("user:u1")).toBe(PK);
    expect(partitionKey("user:u2")).not.toBe(PK);
    expect(Buffer.from(PK.slice(1, -1), "base64")).toHaveLength(12);
  });
});

describe("secondsUntil", () => {
  it("is 0 at the instant", () => {
    expect(secondsUntil(NOW, NOW)).toBe(0);
  });

  it("rounds a partial second up", () => {
    expect(secondsUntil(NOW + 1, NOW)).toBe(1);
    expect(secondsUntil(NOW + 1_999, NOW)).toBe(2);
  });

  it("counts whole seconds exactly", () => {
    expect(secondsUntil(NOW + 60_000, NOW)).toBe(60);
  });

  it("is 0 for an instant in the past", () => {
    expect(secondsUntil(NOW - 10_000, NOW)).toBe(0);
  });
});

describe("compileRule policyName", () => {
  it("quotes a plain name", () => {
    expect(compileRule(makeRule({ name: "per-user" })).policyName).toBe('"per-user"');
  });

  it("keeps spaces and printable punctuation", () => {
    expect(compileRule(makeRule({ name: "Orders: 5/min (beta)" })).policyName).toBe('"Orders: 5/min (beta)"');
  });

  it("escapes a double quote", () => {
    expect(compileRule(makeRule({ name: 'say "hi"' })).policyName).toBe('"say \\"hi\\""');
  });

  it("escapes a backslash", () => {
    expect(compileRule(makeRule({ name: "a\\b" })).policyName).toBe('"a\\\\b"');
  });

  it("escapes a backslash that precedes a quote as two separate characters", () => {
    expect(compileRule(makeRule({ name: '\\"' })).policyName).toBe('"\\\\\\""');
  });

  it('replaces non-ASCII characters with "_"', () => {
    expect(compileRule(makeRule({ name: "café über" })).policyName).toBe('"caf_ _ber"');
  });

  it('replaces control characters with "_"', () => {
    expect(compileRule(makeRule({ name: "a\tb\u007fc" })).policyName).toBe('"a_b_c"');
  });

  it("appears escaped in both IETF headers", () => {
    const item = enforced({ name: 'Ünïcode "q"', limit: 5, window: 60 }, { remaining: 0 });
    const headers = headersOf(true, null, item);
    expect(header(headers, "RateLimit-Policy")).toBe(`"_n_code \\"q\\"";q=5;w=60;pk=${PK}`);
    expect(header(headers, "RateLimit")).toBe(`"_n_code \\"q\\"";r=0;t=42;pk=${PK}`);
  });
});
