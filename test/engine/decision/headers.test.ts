import { describe, expect, it } from "vitest";
import type { RuleResult } from "../../../src/domain/decision.js";
import type { Rule } from "../../../src/domain/rule.js";
import { compileRule, type CompiledRule } from "../../../src/engine/decision/compiled-rule.js";
import { rateLimitHeaders, secondsUntil } from "../../../src/engine/decision/headers.js";
import { makeRule } from "../../support/domain-factory.js";

const NOW = 1_700_000_000_000;

function enforced(
  ruleFields: Partial<Rule>,
  resultFields: Partial<RuleResult> = {},
): { result: RuleResult; compiled: CompiledRule; policyItem: string } {
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
    delayMs: 0,
    consulted: true,
    nearLimit: false,
    ...resultFields,
  };
  return { result, compiled, policyItem: compiled.policyItem };
}

function header(headers: { name: string; value: string }[], name: string): string | undefined {
  return headers.find((h) => h.name === name)?.value;
}

describe("rateLimitHeaders", () => {
  it("returns no headers when there are no enforcing results", () => {
    expect(rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [] })).toEqual([]);
  });

  it("returns no headers for a denial without enforcing results", () => {
    expect(rateLimitHeaders({ allowed: false, nowMs: NOW, retryAfter: 5, enforcing: [] })).toEqual([]);
  });

  it("describes an allowed request exactly", () => {
    const item = enforced({ name: "per-user", limit: 5, window: 60 }, { remaining: 3 });
    expect(rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] })).toEqual([
      { name: "X-RateLimit-Limit", value: "5" },
      { name: "X-RateLimit-Remaining", value: "3" },
      { name: "X-RateLimit-Reset", value: "1700000042" },
      { name: "RateLimit-Policy", value: '"per-user";q=5;w=60' },
      { name: "RateLimit", value: '"per-user";r=3;t=42' },
    ]);
  });

  it("describes a denied request exactly, with Retry-After after the reset", () => {
    const item = enforced({ name: "per-user", limit: 5, window: 60 }, { allowed: false, remaining: 0, retryAfter: 42 });
    expect(rateLimitHeaders({ allowed: false, nowMs: NOW, retryAfter: 42, enforcing: [item] })).toEqual([
      { name: "X-RateLimit-Limit", value: "5" },
      { name: "X-RateLimit-Remaining", value: "0" },
      { name: "X-RateLimit-Reset", value: "1700000042" },
      { name: "Retry-After", value: "42" },
      { name: "RateLimit-Policy", value: '"per-user";q=5;w=60' },
      { name: "RateLimit", value: '"per-user";r=0;t=42' },
    ]);
  });

  it("omits Retry-After when the request is allowed", () => {
    const item = enforced({ name: "p" });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: 7, enforcing: [item] });
    expect(header(headers, "Retry-After")).toBeUndefined();
  });

  it("omits Retry-After on a denial without a retry time", () => {
    const item = enforced({ name: "p" }, { allowed: false, remaining: 0 });
    const headers = rateLimitHeaders({ allowed: false, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(headers.map((h) => h.name)).not.toContain("Retry-After");
  });

  it("takes Retry-After from the decision, not from the result", () => {
    const item = enforced({ name: "p" }, { allowed: false, remaining: 0, retryAfter: 9 });
    const headers = rateLimitHeaders({ allowed: false, nowMs: NOW, retryAfter: 30, enforcing: [item] });
    expect(header(headers, "Retry-After")).toBe("30");
  });

  it("takes the X-RateLimit headers from the first (most restrictive) result", () => {
    const first = enforced({ name: "a", limit: 5 }, { remaining: 1, resetAt: new Date(NOW + 10_000) });
    const second = enforced({ name: "b", limit: 100 }, { remaining: 90, resetAt: new Date(NOW + 60_000) });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [first, second] });
    expect(header(headers, "X-RateLimit-Limit")).toBe("5");
    expect(header(headers, "X-RateLimit-Remaining")).toBe("1");
    expect(header(headers, "X-RateLimit-Reset")).toBe("1700000010");
  });

  it('joins one RateLimit-Policy item per enforcing result with ", " in the given order', () => {
    const first = enforced({ name: "per-user", limit: 5, window: 60 });
    const second = enforced({ name: "per-ip", limit: 100, window: 1, windowUnit: "HOURS" });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [first, second] });
    expect(header(headers, "RateLimit-Policy")).toBe('"per-user";q=5;w=60, "per-ip";q=100;w=3600');
  });

  it('joins one RateLimit item per enforcing result with ", " in the given order', () => {
    const first = enforced({ name: "per-user" }, { remaining: 0, resetAt: new Date(NOW + 42_000) });
    const second = enforced({ name: "per-ip" }, { remaining: 95, resetAt: new Date(NOW + 5_000) });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [first, second] });
    expect(header(headers, "RateLimit")).toBe('"per-user";r=0;t=42, "per-ip";r=95;t=5');
  });

  it("uses the bucket capacity the result reports as the quota", () => {
    const item = enforced({ name: "tb", algorithm: "TOKEN_BUCKET", limit: 10, burst: 25, window: 1 });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(header(headers, "X-RateLimit-Limit")).toBe("25");
    expect(header(headers, "RateLimit-Policy")).toBe('"tb";q=25;w=1');
  });

  it("rounds X-RateLimit-Reset up to the next whole second", () => {
    const item = enforced({ name: "p" }, { resetAt: new Date(NOW + 41_001) });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(header(headers, "X-RateLimit-Reset")).toBe("1700000042");
  });

  it("rounds the RateLimit reset up to whole seconds", () => {
    const item = enforced({ name: "p" }, { resetAt: new Date(NOW + 41_001) });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(header(headers, "RateLimit")).toBe('"p";r=3;t=42');
  });

  it("never shows a negative RateLimit reset", () => {
    const item = enforced({ name: "p" }, { resetAt: new Date(NOW - 5_000) });
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(header(headers, "RateLimit")).toBe('"p";r=3;t=0');
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
    const headers = rateLimitHeaders({ allowed: true, nowMs: NOW, retryAfter: null, enforcing: [item] });
    expect(header(headers, "RateLimit-Policy")).toBe('"_n_code \\"q\\"";q=5;w=60');
    expect(header(headers, "RateLimit")).toBe('"_n_code \\"q\\"";r=0;t=42');
  });
});
