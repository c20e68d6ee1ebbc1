import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RuleChange } from "../../../src/domain/events.js";
import { compileGlob, foldPathCase, MAX_GLOB_FLOATING_SEGMENTS, MAX_GLOB_SEGMENTS, validateGlob, type MatchMeter } from "../../../src/domain/glob.js";
import type { CheckRequest } from "../../../src/domain/request.js";
import type { HttpMethod, Rule } from "../../../src/domain/rule.js";
import { DEFAULT_RULE_LIMITS, LENGTHS } from "../../../src/domain/service-limits.js";
import { compileRule } from "../../../src/engine/decision/compiled-rule.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { RuleIndex } from "../../../src/engine/decision/rule-index.js";
import { makeRule, makeTenantOnlyCheckRequest } from "../../support/domain-factory.js";
import { COSTLIEST_GLOBS, costlyPaths } from "../../harness/hostile-input.js";

function indexOf(rules: readonly Rule[]): RuleIndex {
  return new RuleIndex(rules.map(compileRule));
}

function matchedIds(index: { match(request: CheckRequest): { rule: Rule }[] }, fields: Partial<CheckRequest> = {}): string[] {
  return index
    .match(makeTenantOnlyCheckRequest(fields))
    .map((c) => c.rule.id)
    .sort();
}

function change(kind: RuleChange["kind"], rule: Rule, version = rule.version): RuleChange {
  return {
    kind,
    ruleId: rule.id,
    tenantId: rule.tenantId,
    version,
    rule: kind === "DELETED" ? null : { ...rule, version },
    at: new Date("2024-01-01T00:00:00Z"),
  };
}

describe("RuleIndex tenants", () => {
  it("matches the request's tenant's rules", () => {
    const rule = makeRule({ tenantId: "acme" });
    expect(matchedIds(indexOf([rule]), { tenantId: "acme" })).toEqual([rule.id]);
  });

  it('matches rules of every tenant ("*")', () => {
    const rule = makeRule({ tenantId: "*" });
    expect(matchedIds(indexOf([rule]), { tenantId: "acme" })).toEqual([rule.id]);
  });

  it("matches the tenant's and the global rules together", () => {
    const own = makeRule({ tenantId: "acme" });
    const global = makeRule({ tenantId: "*" });
    expect(matchedIds(indexOf([own, global]), { tenantId: "acme" })).toEqual([own.id, global.id].sort());
  });

  it("never matches another tenant's rules", () => {
    const other = makeRule({ tenantId: "globex" });
    expect(matchedIds(indexOf([other]), { tenantId: "acme" })).toEqual([]);
  });

  it("does not match a tenant whose id is a prefix of the rule's tenant", () => {
    expect(matchedIds(indexOf([makeRule({ tenantId: "acme-eu" })]), { tenantId: "acme" })).toEqual([]);
  });

  it("matches nothing when there are no rules", () => {
    expect(matchedIds(indexOf([]), { resource: "/a" })).toEqual([]);
  });
});

describe("RuleIndex enabled", () => {
  it("never matches a disabled rule", () => {
    expect(matchedIds(indexOf([makeRule({ enabled: false })]))).toEqual([]);
  });

  it("never matches a disabled global rule", () => {
    expect(matchedIds(indexOf([makeRule({ tenantId: "*", enabled: false, resource: "/api/**" })]), { resource: "/api" })).toEqual([]);
  });
});

describe("RuleIndex method", () => {
  it("matches a rule without a method for any method", () => {
    const rule = makeRule({ method: null });
    expect(matchedIds(indexOf([rule]), { method: "DELETE" })).toEqual([rule.id]);
  });

  it("matches a rule without a method for a request without one", () => {
    const rule = makeRule({ method: null });
    expect(matchedIds(indexOf([rule]), { method: null })).toEqual([rule.id]);
  });

  it("matches a rule with a method for that method", () => {
    const rule = makeRule({ method: "POST" });
    expect(matchedIds(indexOf([rule]), { method: "POST" })).toEqual([rule.id]);
  });

  it("does not match a rule with a method for another method", () => {
    expect(matchedIds(indexOf([makeRule({ method: "POST" })]), { method: "GET" })).toEqual([]);
  });

  it("does not match a rule with a method for a request without one", () => {
    expect(matchedIds(indexOf([makeRule({ method: "POST" })]), { method: null })).toEqual([]);
  });

  it("matches a GET rule for HEAD (the GET handler runs), not a HEAD rule for GET", () => {
    const get = makeRule({ method: "GET" });
    const head = makeRule({ method: "HEAD" });
    const post = makeRule({ method: "POST" });
    const index = indexOf([get, head, post]);
    expect(matchedIds(index, { method: "HEAD" }).sort()).toEqual([get.id, head.id].sort());
    expect(matchedIds(index, { method: "GET" })).toEqual([get.id]);
  });
});

describe("RuleIndex resource", () => {
  it("matches a rule without a resource for a request with a resource", () => {
    const rule = makeRule({ resource: null });
    expect(matchedIds(indexOf([rule]), { resource: "/anything/at/all" })).toEqual([rule.id]);
  });

  it("matches a rule without a resource for a request without one", () => {
    const rule = makeRule({ resource: null });
    expect(matchedIds(indexOf([rule]), { resource: null })).toEqual([rule.id]);
  });

  it("does not match a rule with a resource glob for a request without a resource", () => {
    expect(matchedIds(indexOf([makeRule({ resource: "/**" })]), { resource: null })).toEqual([]);
  });

  it("matches an exact resource", () => {
    const rule = makeRule({ resource: "/api/v1/orders" });
    expect(matchedIds(indexOf([rule]), { resource: "/api/v1/orders" })).toEqual([rule.id]);
  });

  it("does not match an exact resource for a path below it", () => {
    expect(matchedIds(indexOf([makeRule({ resource: "/api/v1/orders" })]), { resource: "/api/v1/orders/7" })).toEqual([]);
  });

  it("does not match an exact resource for a path above it", () => {
    expect(matchedIds(indexOf([makeRule({ resource: "/api/v1/orders" })]), { resource: "/api" })).toEqual([]);
  });

  it("matches a ** glob at its own prefix", () => {
    const rule = makeRule({ resource: "/api/**" });
    expect(matchedIds(indexOf([rule]), { resource: "/api" })).toEqual([rule.id]);
  });

  it("matches a ** glob deep below its prefix", () => {
    const rule = makeRule({ resource: "/api/**" });
    expect(matchedIds(indexOf([rule]), { resource: "/api/v1/orders/7/items" })).toEqual([rule.id]);
  });

  it("applies the glob beyond the literal prefix", () => {
    const pdf = makeRule({ resource: "/files/*.pdf" });
    expect(matchedIds(indexOf([pdf]), { resource: "/files/a.pdf" })).toEqual([pdf.id]);
    expect(matchedIds(indexOf([pdf]), { resource: "/files/a.txt" })).toEqual([]);
  });

  it("matches a glob that starts with a wildcard", () => {
    const rule = makeRule({ resource: "/*/health" });
    expect(matchedIds(indexOf([rule]), { resource: "/svc/health" })).toEqual([rule.id]);
  });

  it("matches rules at every depth of the request's path", () => {
    const rules = [
      makeRule({ resource: null }),
      makeRule({ resource: "/**" }),
      makeRule({ resource: "/api/**" }),
      makeRule({ resource: "/api/v1/*" }),
      makeRule({ resource: "/api/v1/orders" }),
      makeRule({ resource: "/api/v2/**" }),
      makeRule({ resource: "/admin/**" }),
    ];
    expect(matchedIds(indexOf(rules), { resource: "/api/v1/orders" })).toEqual(rules.slice(0, 5).map((r) => r.id).sort());
  });

  it("matches the root path", () => {
    const root = makeRule({ resource: "/" });
    expect(matchedIds(indexOf([root, makeRule({ resource: "/a" })]), { resource: "/" })).toEqual([root.id]);
  });

  it("matches a rule whose resource differs only by a trailing slash: both are normalised", () => {
    const rule = makeRule({ resource: "/api/" });
    expect(matchedIds(indexOf([rule]), { resource: "/api" })).toEqual([rule.id]);
  });

  it("returns each matching rule once", () => {
    const rule = makeRule({ tenantId: "*", resource: "/api/**" });
    expect(indexOf([rule]).match(makeTenantOnlyCheckRequest({ resource: "/api/a/b" }))).toHaveLength(1);
  });
});

const TENANT_COUNT = 1000;
const SEGMENTS = ["api", "v1", "v2", "orders", "users", "files", "a.pdf", "b.txt", "x"];
const GLOB_SEGMENTS = [...SEGMENTS, "*", "**", "*.pdf", "v?", "*s"];
const METHODS: HttpMethod[] = ["GET", "POST", "DELETE"];

function referenceMatch(rules: readonly Rule[], req: CheckRequest): string[] {
  return rules
    .filter(
      (r) =>
        r.enabled &&
        (r.tenantId === req.tenantId || r.tenantId === "*") &&
        (r.method === null || r.method === req.method) &&
        (r.resource === null || (req.resource !== null && compileGlob(r.resource).matches(req.resource))),
    )
    .map((r) => r.id)
    .sort();
}

function ruleSpecs(tenants: fc.Arbitrary<string>) {
  return fc.record({
    tenantId: tenants,
    resource: fc.option(
      fc.array(fc.constantFrom(...GLOB_SEGMENTS), { minLength: 1, maxLength: 4 }).map((parts) => "/" + parts.join("/")),
      { nil: null, freq: 5 },
    ),
    method: fc.option(fc.constantFrom(...METHODS), { nil: null }),
    enabled: fc.integer({ min: 0, max: 4 }).map((n) => n > 0),
  });
}

function toRules(specs: readonly Partial<Rule>[]): Rule[] {
  return specs.map((spec, i) => makeRule({ ...spec, id: `r${i}` }));
}

function requests(tenants: fc.Arbitrary<string>) {
  return fc.record({
    tenantId: tenants,
    resource: fc.option(
      fc.array(fc.constantFrom(...SEGMENTS, ""), { minLength: 1, maxLength: 5 }).map((parts) => "/" + parts.join("/")),
      { nil: null, freq: 6 },
    ),
    method: fc.option(fc.constantFrom<HttpMethod>(...METHODS, "PUT"), { nil: null }),
  });
}

describe("RuleIndex against a brute-force filter", () => {
  const manyTenants = fc.oneof(
    { weight: 19, arbitrary: fc.integer({ min: 0, max: TENANT_COUNT - 1 }).map((i) => `t${i}`) },
    { weight: 1, arbitrary: fc.constant("*") },
  );
  const requestTenants = fc.integer({ min: 0, max: TENANT_COUNT }).map((i) => `t${i}`);

  it("matches the same rules with 10,000 rules over 1,000 tenants", () => {
    fc.assert(
      fc.property(
        fc.array(ruleSpecs(manyTenants), { minLength: 10_000, maxLength: 10_000 }),
        fc.array(requests(requestTenants), { minLength: 300, maxLength: 300 }),
        (specs, reqs) => {
          const rules = toRules(specs);
          const index = indexOf(rules);
          for (const fields of reqs) {
            expect(matchedIds(index, fields)).toEqual(referenceMatch(rules, makeTenantOnlyCheckRequest(fields)));
          }
        },
      ),
      { numRuns: 3, endOnFailure: true },
    );
  });

  it("matches the same rules when few tenants share many overlapping rules", () => {
    const fewTenants = fc.constantFrom("t0", "t1", "t2", "*");
    fc.assert(
      fc.property(
        fc.array(ruleSpecs(fewTenants), { maxLength: 60 }),
        fc.array(requests(fc.constantFrom("t0", "t1", "t3")), { minLength: 1, maxLength: 20 }),
        (specs, reqs) => {
          const rules = toRules(specs);
          const index = indexOf(rules);
          for (const fields of reqs) {
            expect(matchedIds(index, fields)).toEqual(referenceMatch(rules, makeTenantOnlyCheckRequest(fields)));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("RuleIndex letter case", () => {
  const ignoringCase = (resource: string) => ({ resource, ignorePathCase: true });

  it("compares a path case by case unless the request ignores case", () => {
    const rule = makeRule({ resource: "/api/getUser" });
    expect(matchedIds(indexOf([rule]), { resource: "/api/getUser" })).toEqual([rule.id]);
    expect(matchedIds(indexOf([rule]), { resource: "/api/getuser" })).toEqual([]);
    expect(matchedIds(indexOf([rule]), { resource: "/API/GETUSER" })).toEqual([]);
  });

  it("still matches a path as spelt where folding would lose it: a \"?\" standing for \"İ\", which folds to two characters", () => {
    const rule = makeRule({ resource: "/files/?" });
    expect(matchedIds(indexOf([rule]), ignoringCase("/files/İ"))).toEqual([rule.id]);
    expect(matchedIds(indexOf([rule]), ignoringCase("/files/x"))).toEqual([rule.id]);
  });

  it("matches every spelling of a rule's path, its literal prefix too, for a request that ignores case", () => {
    const rules = [makeRule({ id: "mixed", resource: "/api/getUser" }), makeRule({ id: "prefix", resource: "/API/V1/*.PDF" }), makeRule({ id: "lower", resource: "/api/**" })];
    const index = indexOf(rules);
    expect(matchedIds(index, ignoringCase("/Api/GETUSER"))).toEqual(["lower", "mixed"]);
    expect(matchedIds(index, ignoringCase("/api/v1/Report.pdf"))).toEqual(["lower", "prefix"]);
    expect(matchedIds(index, { resource: "/api/v1/Report.pdf" })).toEqual(["lower"]);
  });

  it("gives every spelling of a path that ignores case its rules in one order", () => {
    const rules = [makeRule({ id: "upper", resource: "/API/*" }), makeRule({ id: "lower", resource: "/api/*" }), makeRule({ id: "any", resource: "/**" })];
    const index = indexOf(rules);
    const order = (resource: string) => index.match(makeTenantOnlyCheckRequest({ resource, ignorePathCase: true })).map((c) => c.rule.id);
    expect(order("/api/orders")).toHaveLength(3);
    for (const path of ["/API/orders", "/Api/Orders", "/api/ORDERS"]) expect(order(path), path).toEqual(order("/api/orders"));
  });

  it("uses the rule's own glob when folding changes nothing", () => {
    const compiled = compileRule(makeRule({ resource: "/api/orders/*" }));
    expect(compiled.foldedGlob).toBe(compiled.glob);
    expect(compileRule(makeRule({ resource: "/api/Orders/*" })).foldedGlob?.source).toBe("/api/orders/*");
  });

  it("matches as the brute-force filter does, spelling by spelling, with and without ignoring case", () => {
    const spelt = fc.constantFrom(...SEGMENTS, "API", "Orders", "V1", "A.PDF", "oRdErS", "İ", "ΟΔΟΣ", "i\u0307");
    const globs = fc.option(
      fc.array(fc.oneof(spelt, fc.constantFrom("*", "**", "*.PDF", "V?", "?", "ΟΔΟ?", "*Σ")), { minLength: 1, maxLength: 4 }).map((parts) => "/" + parts.join("/")),
      { nil: null, freq: 5 },
    );
    const rules = fc.array(fc.record({ tenantId: fc.constant("acme"), resource: globs }), { maxLength: 40 }).map(toRules);
    const request = fc.record({ path: fc.array(spelt, { minLength: 1, maxLength: 5 }).map((parts) => "/" + parts.join("/")), ignore: fc.boolean() });
    fc.assert(
      fc.property(rules, fc.array(request, { minLength: 1, maxLength: 20 }), (specs, reqs) => {
        const index = indexOf(specs);
        for (const { path, ignore } of reqs) {
          const reference = specs
            .filter((r) => r.resource === null || compileGlob(r.resource).matches(path) || (ignore && compileGlob(foldPathCase(r.resource), "resource", Infinity).matches(foldPathCase(path))))
            .map((r) => r.id)
            .sort();
          expect(matchedIds(index, ignore ? ignoringCase(path) : { resource: path })).toEqual(reference);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("RuleBook", () => {
  it("matches nothing before it is loaded", () => {
    const book = new RuleBook();
    expect(book.size).toBe(0);
    expect(book.lastLoadedAt).toBeNull();
    expect(matchedIds(book)).toEqual([]);
  });

  it("matches loaded rules", () => {
    const book = new RuleBook();
    const rule = makeRule();
    book.load([rule]);
    expect(matchedIds(book)).toEqual([rule.id]);
    expect(book.get(rule.id)).toEqual(rule);
    expect(book.lastLoadedAt).toBeInstanceOf(Date);
  });

  it("keeps a disabled rule but does not match it", () => {
    const book = new RuleBook();
    const rule = makeRule({ enabled: false });
    book.load([rule]);
    expect(book.get(rule.id)).toEqual(rule);
    expect(matchedIds(book)).toEqual([]);
  });

  it("lists rules by tenant, then name", () => {
    const book = new RuleBook();
    const rules = [
      makeRule({ tenantId: "b", name: "z" }),
      makeRule({ tenantId: "a", name: "y" }),
      makeRule({ tenantId: "b", name: "a" }),
      makeRule({ tenantId: "*", name: "m" }),
    ];
    book.load(rules);
    expect(book.list().map((r) => `${r.tenantId}/${r.name}`)).toEqual(["*/m", "a/y", "b/a", "b/z"]);
  });

  it("lists one tenant's rules", () => {
    const book = new RuleBook();
    const own = makeRule({ tenantId: "acme" });
    book.load([own, makeRule({ tenantId: "globex" }), makeRule({ tenantId: "*" })]);
    expect(book.list("acme")).toEqual([own]);
  });

  it("applies a newer version", () => {
    const book = new RuleBook();
    const rule = makeRule({ method: "GET" });
    book.load([rule]);
    expect(book.apply(change("UPDATED", { ...rule, method: "POST" }, 2))).toBe(true);
    expect(book.get(rule.id)?.version).toBe(2);
    expect(matchedIds(book, { method: "GET" })).toEqual([]);
    expect(matchedIds(book, { method: "POST" })).toEqual([rule.id]);
  });

  it("applies a created rule", () => {
    const book = new RuleBook();
    const rule = makeRule();
    expect(book.apply(change("CREATED", rule))).toBe(true);
    expect(matchedIds(book)).toEqual([rule.id]);
  });

  it("ignores a change of the same version", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 3 });
    book.load([rule]);
    expect(book.apply(change("UPDATED", { ...rule, enabled: false }, 3))).toBe(false);
    expect(book.get(rule.id)).toEqual(rule);
    expect(matchedIds(book)).toEqual([rule.id]);
  });

  it("ignores a change of an older version", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 3 });
    book.load([rule]);
    expect(book.apply(change("UPDATED", { ...rule, enabled: false }, 2))).toBe(false);
    expect(book.get(rule.id)?.version).toBe(3);
    expect(matchedIds(book)).toEqual([rule.id]);
  });

  it("removes a deleted rule", () => {
    const book = new RuleBook();
    const rule = makeRule();
    book.load([rule]);
    expect(book.apply(change("DELETED", rule, 2))).toBe(true);
    expect(book.get(rule.id)).toBeNull();
    expect(book.size).toBe(0);
    expect(matchedIds(book)).toEqual([]);
  });

  it("does not resurrect a deleted rule from a late older copy", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 1 });
    book.load([rule]);
    book.apply(change("DELETED", rule, 3));
    expect(book.apply(change("UPDATED", rule, 2))).toBe(false);
    expect(book.get(rule.id)).toBeNull();
    expect(matchedIds(book)).toEqual([]);
  });

  it("does not resurrect a deleted rule from a copy of the deletion's version", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 1 });
    book.load([rule]);
    book.apply(change("DELETED", rule, 2));
    expect(book.apply(change("CREATED", rule, 2))).toBe(false);
    expect(book.get(rule.id)).toBeNull();
  });

  it("does not resurrect a rule deleted before it was ever seen", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 1 });
    book.apply(change("DELETED", rule, 2));
    expect(book.apply(change("CREATED", rule, 1))).toBe(false);
    expect(book.get(rule.id)).toBeNull();
  });

  it("keeps a newer version it already has when loading an older one", () => {
    const book = new RuleBook();
    const v1 = makeRule({ version: 1, limit: 5 });
    book.load([v1]);
    book.apply(change("UPDATED", { ...v1, limit: 50 }, 2));
    book.load([v1]);
    expect(book.get(v1.id)).toMatchObject({ version: 2, limit: 50 });
  });

  it("takes a newer version from a load", () => {
    const book = new RuleBook();
    const v1 = makeRule({ version: 1, limit: 5 });
    book.load([v1]);
    book.load([{ ...v1, version: 2, limit: 9 }]);
    expect(book.get(v1.id)).toMatchObject({ version: 2, limit: 9 });
  });

  it("keeps a rule created after the load's mark, though the snapshot lacks it", () => {
    const book = new RuleBook();
    const old = makeRule();
    book.load([old]);
    const mark = book.mark();
    const created = makeRule();
    book.apply(change("CREATED", created));
    book.load([old], mark);
    expect(book.get(created.id)).toEqual(created);
  });

  it("does not bring back a rule deleted after the load's mark", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 1 });
    book.load([rule]);
    const mark = book.mark();
    book.apply(change("DELETED", rule, 2));
    book.load([rule], mark);
    expect(book.get(rule.id)).toBeNull();
    expect(matchedIds(book)).toEqual([]);
  });

  it("lets a snapshot read after a change decide, and forgets the change's bookkeeping", () => {
    const book = new RuleBook();
    const rule = makeRule({ version: 1 });
    book.apply(change("CREATED", rule));
    book.load([], book.mark());
    expect(book.get(rule.id)).toBeNull();
    book.load([rule], book.mark());
    expect(book.get(rule.id)).toEqual(rule);
  });

  it("drops rules a load no longer contains", () => {
    const book = new RuleBook();
    const kept = makeRule();
    const gone = makeRule();
    book.load([kept, gone]);
    book.load([kept]);
    expect(book.get(gone.id)).toBeNull();
    expect(matchedIds(book)).toEqual([kept.id]);
  });
});

describe("compileRule", () => {
  it("has no glob when the rule has no resource", () => {
    expect(compileRule(makeRule({ resource: null })).glob).toBeNull();
  });

  it("compiles the rule's resource", () => {
    expect(compileRule(makeRule({ resource: "/api/**" })).glob?.literalPrefix).toEqual(["api"]);
  });

  it("derives the store parameters from the rule", () => {
    const compiled = compileRule(makeRule({ algorithm: "TOKEN_BUCKET", limit: 10, burst: 25, window: 2, windowUnit: "MINUTES", action: "THROTTLE" }));
    expect(compiled.windowSeconds).toBe(120);
    expect(compiled.params).toEqual({ algorithm: "TOKEN_BUCKET", limit: 10, windowMs: 120_000, capacity: 25, action: "THROTTLE" });
  });

  it("uses the limit as capacity for algorithms without burst", () => {
    expect(compileRule(makeRule({ algorithm: "FIXED_WINDOW", limit: 10, burst: 25 })).params.capacity).toBe(10);
  });

  it("builds the bucket key from the rule's scope", () => {
    const compiled = compileRule(makeRule({ tenantId: "*", scope: ["USER"] }));
    expect(compiled.keyOf(makeTenantOnlyCheckRequest({ tenantId: "acme", userId: "u1" }))).toBe("tenant:acme|user:u1");
  });
});

/**
 * What one check's glob matching costs, in the matcher's steps (see
 * glob.ts): at most the request tenant's and tenant "*"'s rules are tested,
 * each within 1 + G + T + F x (S + T) steps, so a tenant with the costliest
 * globs validation accepts, against the longest path a request may name,
 * costs at most its number of rules times that.
 */
describe("RuleIndex matching cost", () => {
  const longestPath = LENGTHS.resource;
  const perRuleBound = 1 + MAX_GLOB_SEGMENTS + longestPath + MAX_GLOB_FLOATING_SEGMENTS * (longestPath / 2 + longestPath);

  function stepsOf(index: RuleIndex, request: Partial<CheckRequest>): number {
    const meter: MatchMeter = { steps: 0 };
    index.match(makeTenantOnlyCheckRequest(request), meter);
    return meter.steps;
  }

  const [longPath] = costlyPaths(longestPath) as [string];

  it('holds 200 rules of "/*" + 508 × "a" + "b" against a 2,048-character path to 511 steps each', () => {
    const attack = "/*" + "a".repeat(508) + "b";
    validateGlob(attack);
    const index = indexOf(Array.from({ length: 200 }, () => makeRule({ tenantId: "attacker", resource: attack })));
    expect(stepsOf(index, { tenantId: "attacker", resource: longPath })).toBe(200 * 511);
  });

  it("holds a tenant at the rule quota, every rule with one of the costliest accepted globs, within the quota times the per-rule bound, and costs other tenants nothing", () => {
    const quota = DEFAULT_RULE_LIMITS.maxRulesPerTenant;
    for (const source of COSTLIEST_GLOBS) validateGlob(source);
    const rules = Array.from({ length: quota }, (_, i) => makeRule({ tenantId: "attacker", resource: COSTLIEST_GLOBS[i % COSTLIEST_GLOBS.length]! }));
    const index = indexOf(rules);
    for (const resource of costlyPaths(longestPath)) {
      expect(resource.length).toBe(longestPath);
      expect(stepsOf(index, { tenantId: "attacker", resource })).toBeLessThanOrEqual(quota * perRuleBound);
      expect(stepsOf(index, { tenantId: "victim", resource })).toBe(0);
    }
    expect(perRuleBound).toBe(8_225);
  });
});

describe("RuleBook and rules an older version wrote", () => {
  it("takes a rule without attribute keys or conditions (a snapshot, or a change from an instance not yet upgraded) as having none", () => {
    const { attributeKeys: _keys, when: _when, reach: _reach, ...older } = makeRule({ scope: ["USER"] });
    const book = new RuleBook();
    book.load([older as Rule]);
    expect(book.get(older.id)).toMatchObject({ attributeKeys: [], when: [], reach: "REGIONAL" });
    const changed = { ...older, version: 2, limit: 9 };
    expect(book.apply({ kind: "UPDATED", ruleId: older.id, tenantId: older.tenantId, version: 2, rule: changed as Rule, at: new Date() })).toBe(true);
    expect(book.get(older.id)).toMatchObject({ limit: 9, attributeKeys: [], when: [] });
    expect(matchedIds(book, { userId: "u1" })).toEqual([older.id]);
  });
});
