import { describe, expect, it } from "vitest";
import type { Override, OverrideSpec } from "../../../src/domain/override.js";
import { validateOverride } from "../../../src/domain/override.js";
import type { Rule } from "../../../src/domain/rule.js";
import { compileRule } from "../../../src/engine/decision/compiled-rule.js";
import { globMatches, RuleOverrides } from "../../../src/engine/decision/override-index.js";
import { targetValue } from "../../../src/domain/bucket-key.js";
import { foldPathCase } from "../../../src/domain/glob.js";
import { makeRule, makeTenantOnlyCheckRequest } from "../../support/domain-factory.js";
import { validationErrorOf } from "../../support/validation-error.js";

const NOW = Date.UTC(2026, 10, 30, 12);
let sequence = 0;

function override(rule: Rule, fields: Partial<OverrideSpec>): Override {
  sequence += 1;
  return {
    id: `o${sequence}`,
    tenantId: rule.tenantId,
    ruleId: rule.id,
    dimension: "USER",
    attributeKey: null,
    match: "EXACT",
    identifier: "alice",
    limit: 1000,
    burst: null,
    window: null,
    windowUnit: null,
    expiresAt: null,
    note: null,
    version: 2,
    actor: null,
    createdAt: new Date(NOW),
    updatedAt: new Date(NOW),
    ...fields,
  };
}

function finder(rule: Rule, overrides: Override[]) {
  const index = new RuleOverrides();
  for (const o of overrides) index.set(o);
  const compiled = compileRule(rule);
  return (fields: Parameters<typeof makeTenantOnlyCheckRequest>[0], nowMs = NOW) => {
    const request = makeTenantOnlyCheckRequest(fields);
    const found = index.find(rule, compiled.targets, (target) => targetValue(target, request), nowMs, request.ignorePathCase);
    return found === null ? null : { identifier: found.override.identifier, limit: found.params.limit };
  };
}

describe("an override's precedence", () => {
  const rule = makeRule({ scope: ["USER", "IP"], limit: 5 });

  it("takes an exact identifier over any glob, the most specific glob over others, then the rule", () => {
    const find = finder(rule, [
      override(rule, { match: "GLOB", identifier: "*@acme.com", limit: 50 }),
      override(rule, { match: "GLOB", identifier: "*@sales.acme.com", limit: 60 }),
      override(rule, { match: "EXACT", identifier: "bob@sales.acme.com", limit: 70 }),
    ]);
    expect(find({ userId: "bob@sales.acme.com", ip: "10.0.0.1" })).toEqual({ identifier: "bob@sales.acme.com", limit: 70 });
    expect(find({ userId: "eve@sales.acme.com", ip: "10.0.0.1" })).toEqual({ identifier: "*@sales.acme.com", limit: 60 });
    expect(find({ userId: "eve@acme.com", ip: "10.0.0.1" })).toEqual({ identifier: "*@acme.com", limit: 50 });
    expect(find({ userId: "eve@example.com", ip: "10.0.0.1" })).toBeNull();
  });

  it("takes the longest CIDR block for IP, and an exact override of an earlier dimension before any", () => {
    const find = finder(rule, [
      override(rule, { dimension: "IP", match: "CIDR", identifier: "10.0.0.0/8", limit: 8 }),
      override(rule, { dimension: "IP", match: "CIDR", identifier: "10.1.0.0/16", limit: 16 }),
      override(rule, { dimension: "IP", match: "EXACT", identifier: "10.1.2.3", limit: 32 }),
      override(rule, { dimension: "IP", match: "CIDR", identifier: "2001:db8::/32", limit: 6 }),
      override(rule, { dimension: "USER", identifier: "vip", limit: 1 }),
    ]);
    expect(find({ userId: "u", ip: "10.1.2.3" })).toMatchObject({ limit: 32 });
    expect(find({ userId: "u", ip: "10.1.9.9" })).toMatchObject({ limit: 16 });
    expect(find({ userId: "u", ip: "10.200.0.1" })).toMatchObject({ limit: 8 });
    expect(find({ userId: "u", ip: "11.0.0.1" })).toBeNull();
    expect(find({ userId: "u", ip: "2001:db8:1::5" })).toMatchObject({ limit: 6 });
    expect(find({ userId: "vip", ip: "10.1.2.3" })).toMatchObject({ limit: 1 });
  });

  it("skips an expired override from the moment it expires, falling back to the next", () => {
    const find = finder(rule, [
      override(rule, { identifier: "alice", limit: 100, expiresAt: new Date(NOW + 1000) }),
      override(rule, { match: "GLOB", identifier: "ali*", limit: 10 }),
    ]);
    expect(find({ userId: "alice", ip: "10.0.0.1" }, NOW + 999)).toMatchObject({ limit: 100 });
    expect(find({ userId: "alice", ip: "10.0.0.1" }, NOW + 1000)).toMatchObject({ limit: 10 });
  });

  it("replaces an override of the same identity, and forgets a deleted one", () => {
    const index = new RuleOverrides();
    const first = override(rule, { identifier: "alice", limit: 100 });
    index.set(first);
    index.set({ ...override(rule, { identifier: "alice", limit: 200 }) });
    expect(index.size).toBe(1);
    const compiled = compileRule(rule);
    const request = makeTenantOnlyCheckRequest({ userId: "alice", ip: "10.0.0.1" });
    expect(index.find(rule, compiled.targets, (t) => targetValue(t, request), NOW)?.params.limit).toBe(200);
    index.delete([...index.values()][0]!.id);
    expect(index.find(rule, compiled.targets, (t) => targetValue(t, request), NOW)).toBeNull();
  });

  it("finds one of 100,000 overrides without looking at the others", () => {
    const overrides = Array.from({ length: 100_000 }, (_, i) => override(rule, { identifier: `user-${i}`, limit: i + 1 }));
    overrides.push(override(rule, { match: "GLOB", identifier: "team-*", limit: 7 }));
    const find = finder(rule, overrides);
    expect(find({ userId: "user-99999", ip: "10.0.0.1" })).toMatchObject({ limit: 100_000 });
    expect(find({ userId: "team-x", ip: "10.0.0.1" })).toMatchObject({ limit: 7 });
  });
});

/** The index holding `overrides`, and the identifier of the override it finds for a check (null: none). */
function identifierFinder(rule: Rule, overrides: Override[]) {
  const index = new RuleOverrides();
  for (const o of overrides) index.set(o);
  const compiled = compileRule(rule);
  const find = (fields: Parameters<typeof makeTenantOnlyCheckRequest>[0]) => {
    const request = makeTenantOnlyCheckRequest(fields);
    return index.find(rule, compiled.targets, (target) => targetValue(target, request), NOW, request.ignorePathCase)?.override.identifier ?? null;
  };
  return { index, find };
}

describe("an ENDPOINT override and a check that ignores letter case", () => {
  const rule = makeRule({ scope: ["ENDPOINT"], resource: "/api/**", method: null, limit: 100 });
  /** A check as parseCheckRequest leaves it: the path folded when it ignores case. */
  const ignoringCase = (resource: string) => ({ method: "GET" as const, resource: foldPathCase(resource), ignorePathCase: true });

  it("applies to every spelling of its endpoint, exact or glob, and is forgotten with it", () => {
    const exact = override(rule, { dimension: "ENDPOINT", identifier: "GET /api/Export", limit: 1 });
    const glob = override(rule, { dimension: "ENDPOINT", match: "GLOB", identifier: "GET /api/Reports/*", limit: 2 });
    const { index, find } = identifierFinder(rule, [exact, glob]);
    for (const path of ["/api/Export", "/api/export", "/API/EXPORT"]) expect(find(ignoringCase(path)), path).toBe("GET /api/Export");
    expect(find(ignoringCase("/API/reports/q1"))).toBe("GET /api/Reports/*");
    // Spelt case by case, only the spelling it names.
    expect(find({ method: "GET", resource: "/api/Export" })).toBe("GET /api/Export");
    expect(find({ method: "GET", resource: "/api/export" })).toBeNull();
    index.delete(exact.id);
    index.delete(glob.id);
    expect(find(ignoringCase("/api/Export"))).toBeNull();
    expect(find(ignoringCase("/api/Reports/q1"))).toBeNull();
  });
});

describe("two exact ENDPOINT overrides that differ only in letter case", () => {
  const rule = makeRule({ scope: ["ENDPOINT"], resource: "/api/**", method: null, limit: 100 });
  const folded = { method: "GET" as const, resource: "/api/export", ignorePathCase: true };

  it("name their endpoint as each is spelt, and for a check that ignores case the one written last, whatever order they were loaded in", () => {
    const lower = { ...override(rule, { dimension: "ENDPOINT", identifier: "GET /api/export", limit: 1 }), version: 3 };
    const upper = { ...override(rule, { dimension: "ENDPOINT", identifier: "GET /api/Export", limit: 2 }), version: 4 };
    for (const order of [[lower, upper], [upper, lower]]) {
      const { index, find } = identifierFinder(rule, order);
      expect(find({ method: "GET", resource: "/api/export" })).toBe("GET /api/export");
      expect(find({ method: "GET", resource: "/api/Export" })).toBe("GET /api/Export");
      expect(find(folded)).toBe("GET /api/Export");
      index.delete(upper.id);
      expect(find(folded)).toBe("GET /api/export");
      index.set(upper);
      index.delete(lower.id);
      expect(find(folded)).toBe("GET /api/Export");
      index.delete(upper.id);
      expect(find(folded)).toBeNull();
    }
  });

  it("pass over a spelling that has expired or that the rule cannot take to the other", () => {
    const lower = { ...override(rule, { dimension: "ENDPOINT", identifier: "GET /api/export", limit: 1 }), version: 3 };
    const expired = { ...override(rule, { dimension: "ENDPOINT", identifier: "GET /api/Export", limit: 2, expiresAt: new Date(NOW - 1) }), version: 4 };
    expect(identifierFinder(rule, [lower, expired]).find(folded)).toBe("GET /api/export");
    // A limit SLIDING_WINDOW_LOG cannot hold: the rule, changed to it after the override was set, cannot take it.
    const log = { ...rule, algorithm: "SLIDING_WINDOW_LOG" as const, version: 5 };
    const tooLarge = { ...override(log, { dimension: "ENDPOINT", identifier: "GET /api/Export", limit: 10_000_000 }), version: 4 };
    const { find } = identifierFinder(log, [lower, tooLarge]);
    expect(find(folded)).toBe("GET /api/export");
  });
});

describe("two ENDPOINT globs that differ only in letter case", () => {
  const rule = makeRule({ scope: ["ENDPOINT"], resource: "/api/**", method: null, limit: 100 });
  const folded = { method: "GET" as const, resource: "/api/reports/q1", ignorePathCase: true };

  it("for a check that ignores case, the one written last applies whatever the load order, and one the rule cannot take hides none", () => {
    const lower = { ...override(rule, { dimension: "ENDPOINT", match: "GLOB", identifier: "GET /api/reports/*", limit: 1 }), version: 4 };
    const upper = { ...override(rule, { dimension: "ENDPOINT", match: "GLOB", identifier: "GET /api/Reports/*", limit: 2 }), version: 3 };
    for (const order of [[lower, upper], [upper, lower]]) expect(identifierFinder(rule, order).find(folded)).toBe("GET /api/reports/*");
    const log = { ...rule, algorithm: "SLIDING_WINDOW_LOG" as const, version: 5 };
    const tooLarge = { ...override(log, { dimension: "ENDPOINT", match: "GLOB", identifier: "GET /api/reports/*", limit: 10_000_000 }), version: 4 };
    expect(identifierFinder(log, [tooLarge, upper]).find(folded)).toBe("GET /api/Reports/*");
  });
});

describe("globMatches", () => {
  it.each([
    ["*@acme.com", "bob@acme.com", true],
    ["*@acme.com", "bob@acme.co", false],
    ["a*b*c", "abc", true],
    ["a*b*c", "aXbYc", true],
    ["a*b*c", "acb", false],
    ["ab*ba", "aba", false],
    ["*", "", true],
    ["x**y", "xy", true],
  ])("%s against %s: %s", (glob, value, expected) => {
    expect(globMatches(glob.split("*"), value)).toBe(expected);
  });
});

describe("validateOverride", () => {
  const rule = makeRule({ scope: ["USER", "IP"], attributeKeys: ["customer"], algorithm: "SLIDING_WINDOW_LOG", limit: 5 });
  const now = new Date(NOW);
  const reject = (input: Record<string, unknown>) => validationErrorOf(() => validateOverride({ ruleId: rule.id, limit: 10, ...input }, rule, now));

  it.each([
    [{ identifier: "x" }, "input.dimension", "input.dimension or attributeKey: give exactly one, the value of the rule's buckets the override names"],
    [{ dimension: "API_KEY", identifier: "x" }, "input.dimension", "input.dimension API_KEY is not what the rule's buckets are keyed by: USER, IP, attribute customer"],
    [{ attributeKey: "plan", identifier: "x" }, "input.attributeKey", "input.attributeKey plan is not what the rule's buckets are keyed by: USER, IP, attribute customer"],
    [{ dimension: "USER", match: "CIDR", identifier: "10.0.0.0/8" }, "input.identifier", "input.identifier can be a CIDR block only for IP"],
    [{ dimension: "IP", match: "CIDR", identifier: "10.1.0.0/8" }, "input.identifier", "input.identifier has address bits set past its /8: give the block's network address"],
    [{ dimension: "IP", match: "CIDR", identifier: "10.0.0.0/33" }, "input.identifier", 'input.identifier must end in a prefix length from 0 to 32 (got "33")'],
    [{ dimension: "IP", identifier: "nope" }, "input.identifier", 'input.identifier must be an IPv4 or IPv6 address (got "nope")'],
    [{ dimension: "USER", match: "GLOB", identifier: "alice" }, "input.identifier", 'input.identifier is a glob without "*": use match EXACT'],
    [{ dimension: "USER", identifier: "a", burst: 3 }, "input.burst", "input.burst applies to TOKEN_BUCKET and LEAKY_BUCKET only (the rule is SLIDING_WINDOW_LOG)"],
    [{ dimension: "USER", identifier: "a", limit: 100_001 }, "input.limit", "input.limit must be at most 100000 for SLIDING_WINDOW_LOG, which stores one entry per admitted request; use SLIDING_WINDOW_COUNTER above that"],
    [{ dimension: "USER", identifier: "a", expiresAt: new Date(NOW - 1).toISOString() }, "input.expiresAt", `input.expiresAt must be in the future (got ${new Date(NOW - 1).toISOString()})`],
    [{ dimension: "USER", identifier: "a", window: 400, windowUnit: "DAYS" }, "input.window", "input.window must be at most 366 days (got 400 days)"],
  ])("refuses %j, naming %s", (input, field, message) => {
    const error = reject(input);
    expect(error.field).toBe(field);
    expect(error.message).toBe(message);
  });

  it("gives a calendar rule another limit but not another window: its window is the calendar's period", () => {
    const monthly = makeRule({ scope: ["USER"], algorithm: "FIXED_WINDOW", calendar: { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null } });
    expect(validateOverride({ ruleId: monthly.id, dimension: "USER", identifier: "vip", limit: 5000 }, monthly, now).limit).toBe(5000);
    const error = validationErrorOf(() => validateOverride({ ruleId: monthly.id, dimension: "USER", identifier: "vip", limit: 5000, window: 1, windowUnit: "DAYS" }, monthly, now));
    expect(error.message).toBe("input.window cannot be given for a rule with a calendar: its window is the calendar's MONTH");
  });

  it("stores an exact IP and a block canonical", () => {
    expect(validateOverride({ ruleId: rule.id, dimension: "IP", identifier: "::FFFF:10.0.0.1", limit: 1 }, rule, now).identifier).toBe("10.0.0.1");
    expect(validateOverride({ ruleId: rule.id, dimension: "IP", match: "CIDR", identifier: "2001:DB8::/32", limit: 1 }, rule, now).identifier).toBe("2001:db8::/32");
  });
});
