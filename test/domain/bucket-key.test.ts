import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { clientFingerprint, compileBucketKey, dimensionValueOfKey, targetValue, WHOLE_RULE_KEY } from "../../src/domain/bucket-key.js";
import type { CheckRequest } from "../../src/domain/request.js";
import { DIMENSIONS, type Dimension } from "../../src/domain/rule.js";
import { makeTenantOnlyCheckRequest } from "../support/domain-factory.js";

function keyOf(scope: Dimension[], fields: Partial<CheckRequest>, tenantId = "acme"): string | null {
  return compileBucketKey({ tenantId, scope, attributeKeys: [] })(makeTenantOnlyCheckRequest(fields));
}

const full: Partial<CheckRequest> = {
  userId: "u42",
  ip: "10.0.0.1",
  apiKey: "sk_live_secret",
  userAgent: "curl/8.0",
  resource: "/api/v1/orders",
  method: "POST",
};

function hash22(text: string): string {
  return createHash("sha256").update(text).digest("base64url").slice(0, 22);
}

describe("compileBucketKey labels", () => {
  it('keys a rule with an empty scope by "*"', () => {
    expect(keyOf([], full)).toBe(WHOLE_RULE_KEY);
    expect(WHOLE_RULE_KEY).toBe("*");
  });

  it("keys an empty-scope rule by the same bucket for every request", () => {
    expect(keyOf([], {})).toBe("*");
  });

  it("labels the tenant", () => {
    expect(keyOf(["TENANT"], full)).toBe("tenant:acme");
  });

  it("labels the user", () => {
    expect(keyOf(["USER"], full)).toBe("user:u42");
  });

  it("labels the ip", () => {
    expect(keyOf(["IP"], full)).toBe("ip:10.0.0.1");
  });

  it("labels the API key by its 22-character hash", () => {
    expect(keyOf(["API_KEY"], full)).toBe(`api_key:${hash22("sk_live_secret")}`);
  });

  it("labels the client by its fingerprint", () => {
    expect(keyOf(["CLIENT"], full)).toBe(`client:${clientFingerprint(makeTenantOnlyCheckRequest(full))}`);
  });

  it("labels the endpoint by method and resource", () => {
    expect(keyOf(["ENDPOINT"], full)).toBe("endpoint:POST /api/v1/orders");
  });

  it('labels the endpoint with "ANY" when the request has no method', () => {
    expect(keyOf(["ENDPOINT"], { resource: "/api/v1/orders" })).toBe("endpoint:ANY /api/v1/orders");
  });

  it("names the endpoint by the rule's method when it has one: a GET rule counts HEAD in its GET bucket, and matches GET overrides", () => {
    const head = makeTenantOnlyCheckRequest({ resource: "/api/v1/orders", method: "HEAD" });
    expect(compileBucketKey({ tenantId: "acme", scope: ["ENDPOINT"], attributeKeys: [], method: "GET" })(head)).toBe("endpoint:GET /api/v1/orders");
    expect(compileBucketKey({ tenantId: "acme", scope: ["ENDPOINT"], attributeKeys: [], method: null })(head)).toBe("endpoint:HEAD /api/v1/orders");
    expect(targetValue({ dimension: "ENDPOINT", attributeKey: null }, head, "GET")).toBe("GET /api/v1/orders");
    expect(targetValue({ dimension: "ENDPOINT", attributeKey: null }, head)).toBe("HEAD /api/v1/orders");
  });

  it("joins several dimensions with |", () => {
    expect(keyOf(["USER", "IP"], full)).toBe("user:u42|ip:10.0.0.1");
  });

  it("keys by every dimension in one fixed order", () => {
    expect(keyOf([...DIMENSIONS], full)).toBe(
      [
        "tenant:acme",
        "user:u42",
        "ip:10.0.0.1",
        `api_key:${hash22("sk_live_secret")}`,
        `client:${clientFingerprint(makeTenantOnlyCheckRequest(full))}`,
        "endpoint:POST /api/v1/orders",
      ].join("|"),
    );
  });

  it("orders dimensions the same whatever order the scope lists", () => {
    const expected = keyOf(["TENANT", "USER", "IP", "ENDPOINT"], full);
    expect(keyOf(["ENDPOINT", "IP", "USER", "TENANT"], full)).toBe(expected);
    expect(keyOf(["IP", "TENANT", "ENDPOINT", "USER"], full)).toBe(expected);
  });

  it("orders every permutation of the scope identically", () => {
    const permutation = fc.shuffledSubarray([...DIMENSIONS], { minLength: DIMENSIONS.length, maxLength: DIMENSIONS.length });
    const expected = keyOf([...DIMENSIONS], full);
    fc.assert(fc.property(permutation, (scope) => keyOf(scope, full) === expected));
  });
});

describe("compileBucketKey missing dimensions", () => {
  it("returns null for USER without a userId", () => {
    expect(keyOf(["USER"], { ip: "10.0.0.1" })).toBeNull();
  });

  it("returns null for IP without an ip", () => {
    expect(keyOf(["IP"], { userId: "u1" })).toBeNull();
  });

  it("returns null for API_KEY without an apiKey", () => {
    expect(keyOf(["API_KEY"], { userId: "u1" })).toBeNull();
  });

  it("returns null for ENDPOINT without a resource", () => {
    expect(keyOf(["ENDPOINT"], { method: "GET" })).toBeNull();
  });

  it("returns null for CLIENT with none of ip, userAgent and apiKey", () => {
    expect(keyOf(["CLIENT"], { userId: "u1", resource: "/a" })).toBeNull();
  });

  it.each([
    ["ip", { ip: "10.0.0.1" }],
    ["userAgent", { userAgent: "curl/8.0" }],
    ["apiKey", { apiKey: "k" }],
  ] as const)("keys CLIENT with only %s", (_field, fields) => {
    expect(keyOf(["CLIENT"], fields)).toMatch(/^client:[A-Za-z0-9_-]{22}$/);
  });

  it("returns null when any one of several dimensions is missing", () => {
    expect(keyOf(["USER", "IP"], { userId: "u1" })).toBeNull();
    expect(keyOf(["USER", "IP"], { ip: "10.0.0.1" })).toBeNull();
  });
});

describe("compileBucketKey for rules of every tenant", () => {
  it("keys by tenant as well when the scope is not empty", () => {
    expect(keyOf(["USER"], { tenantId: "acme", userId: "u1" }, "*")).toBe("tenant:acme|user:u1");
  });

  it("gives the same user of two tenants two buckets", () => {
    const a = keyOf(["USER"], { tenantId: "acme", userId: "u1" }, "*");
    const b = keyOf(["USER"], { tenantId: "globex", userId: "u1" }, "*");
    expect(a).not.toBe(b);
  });

  it("keys by tenant once when the scope already names TENANT", () => {
    expect(keyOf(["TENANT", "USER"], { tenantId: "acme", userId: "u1" }, "*")).toBe("tenant:acme|user:u1");
  });

  it("is one global bucket when the scope is empty", () => {
    expect(keyOf([], { tenantId: "acme" }, "*")).toBe("*");
    expect(keyOf([], { tenantId: "globex" }, "*")).toBe("*");
  });

  it("does not add the tenant for a rule of one tenant", () => {
    expect(keyOf(["USER"], { tenantId: "acme", userId: "u1" }, "acme")).toBe("user:u1");
  });
});

describe("compileBucketKey secrets", () => {
  it("never shows the API key in the key", () => {
    const key = keyOf([...DIMENSIONS], { ...full, apiKey: "sk_live_0123456789abcdef" })!;
    expect(key).not.toContain("sk_live_0123456789abcdef");
    expect(key).not.toContain("0123456789");
  });

  it("names the API key by a 22-character base64url hash", () => {
    expect(keyOf(["API_KEY"], { apiKey: "secret" })).toMatch(/^api_key:[A-Za-z0-9_-]{22}$/);
  });

  it("gives different API keys different buckets", () => {
    expect(keyOf(["API_KEY"], { apiKey: "secret-1" })).not.toBe(keyOf(["API_KEY"], { apiKey: "secret-2" }));
  });

  it("gives the same API key the same bucket", () => {
    expect(keyOf(["API_KEY"], { apiKey: "secret" })).toBe(keyOf(["API_KEY"], { apiKey: "secret" }));
  });

  it("never shows the API key through the client fingerprint", () => {
    const secret = "sk_live_abcdefghijklmnop";
    expect(clientFingerprint({ ip: null, userAgent: null, apiKey: secret })).not.toContain(secret);
  });
});

describe("compileBucketKey escaping", () => {
  it('escapes "|" inside a value', () => {
    expect(keyOf(["USER"], { userId: "a|b" })).toBe("user:a%7Cb");
  });

  it('escapes "%" inside a value', () => {
    expect(keyOf(["USER"], { userId: "100%" })).toBe("user:100%25");
  });

  it('escapes "%" before "|" so an escape sequence in a value stays distinct', () => {
    expect(keyOf(["USER"], { userId: "%7C" })).toBe("user:%257C");
    expect(keyOf(["USER"], { userId: "%7C" })).not.toBe(keyOf(["USER"], { userId: "|" }));
  });

  it("escapes values in the endpoint", () => {
    expect(keyOf(["ENDPOINT"], { resource: "/a|b%c", method: "GET" })).toBe("endpoint:GET /a%7Cb%25c");
  });

  it("escapes the tenant", () => {
    expect(keyOf(["TENANT"], { tenantId: "a|b" })).toBe("tenant:a%7Cb");
  });

  it('keeps a userId containing "|ip:" apart from a user and an ip', () => {
    const forged = keyOf(["USER", "IP"], { userId: "a|ip:b", ip: "c" });
    const honest = keyOf(["USER", "IP"], { userId: "a", ip: "b|ip:c" });
    const plain = keyOf(["USER", "IP"], { userId: "a", ip: "b" });
    expect(new Set([forged, honest, plain]).size).toBe(3);
  });

  it("maps distinct (userId, ip) pairs to distinct keys", () => {
    const token = fc.constantFrom("a", "b", "|", "%", "7C", "25", "ip:", "|ip:");
    const value = fc.array(token, { minLength: 1, maxLength: 4 }).map((tokens) => tokens.join(""));
    const lookalikes = ([a, b, c]: [string, string, string]): [string, string][] => [
      [a, b],
      [`${a}|ip:${b}`, c],
      [a, `${b}|ip:${c}`],
      [a.replaceAll("|", "%7C"), b],
      [a, b.replaceAll("%", "%25")],
    ];
    const keyOfPair = compileBucketKey({ tenantId: "acme", scope: ["USER", "IP"], attributeKeys: [] });
    fc.assert(
      fc.property(fc.array(fc.tuple(value, value, value), { minLength: 1, maxLength: 40 }), (triples) => {
        const pairs = new Map(triples.flatMap(lookalikes).map((pair) => [JSON.stringify(pair), pair] as const));
        const keys = new Set([...pairs.values()].map(([userId, ip]) => keyOfPair(makeTenantOnlyCheckRequest({ userId, ip }))));
        expect(keys.size).toBe(pairs.size);
      }),
      { numRuns: 300 },
    );
  });

  it("maps distinct (tenantId, userId) pairs to distinct keys under a rule of every tenant", () => {
    const unit = fc.constantFrom("a", "|", "%", ":", "u", "s", "e", "r", "7", "C");
    const value = fc.string({ unit, minLength: 1, maxLength: 8 });
    const keyOfPair = compileBucketKey({ tenantId: "*", scope: ["USER"], attributeKeys: [] });
    fc.assert(
      fc.property(value, value, value, value, (t1, u1, t2, u2) => {
        fc.pre(t1 !== t2 || u1 !== u2);
        const first = keyOfPair(makeTenantOnlyCheckRequest({ tenantId: t1, userId: u1 }));
        expect(first).not.toBe(keyOfPair(makeTenantOnlyCheckRequest({ tenantId: t2, userId: u2 })));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("dimensionValueOfKey", () => {
  it("reads back each dimension's value as the request had it, for any value, beside any attribute", () => {
    const text = fc.string({ unit: fc.constantFrom("a", "|", "%", "7", "C", "2", "5", ":", "attr.user:") });
    fc.assert(
      fc.property(text, text, text, (userId, ip, plan) => {
        const request = makeTenantOnlyCheckRequest({ ...full, userId: `u${userId}`, ip: `i${ip}`, attributes: new Map([["plan", plan]]) });
        const key = compileBucketKey({ tenantId: "*", scope: ["USER", "IP", "API_KEY", "CLIENT"], attributeKeys: ["plan"] })(request)!;
        for (const dimension of ["TENANT", "USER", "IP", "API_KEY", "CLIENT"] as const) {
          expect(dimensionValueOfKey(key, dimension)).toBe(targetValue({ dimension, attributeKey: null }, request));
        }
        expect(dimensionValueOfKey(key, "ENDPOINT")).toBeNull();
      }),
    );
  });
});

describe("clientFingerprint", () => {
  const caller = { ip: "1.2.3.4", userAgent: "curl/8.0", apiKey: "secret" };

  it("is stable", () => {
    expect(clientFingerprint(caller)).toBe(clientFingerprint({ ...caller }));
  });

  it("is 22 base64url characters", () => {
    expect(clientFingerprint(caller)).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it("differs when the ip differs", () => {
    expect(clientFingerprint({ ...caller, ip: "1.2.3.5" })).not.toBe(clientFingerprint(caller));
  });

  it("differs when the userAgent differs", () => {
    expect(clientFingerprint({ ...caller, userAgent: "curl/8.1" })).not.toBe(clientFingerprint(caller));
  });

  it("differs when the apiKey differs", () => {
    expect(clientFingerprint({ ...caller, apiKey: "secret2" })).not.toBe(clientFingerprint(caller));
  });

  it("differs when a field is absent instead of present", () => {
    expect(clientFingerprint({ ...caller, apiKey: null })).not.toBe(clientFingerprint(caller));
  });

  it("differs when a character moves from the userAgent to the ip", () => {
    const a = clientFingerprint({ ip: "1.2.3.4", userAgent: "ab", apiKey: null });
    const b = clientFingerprint({ ip: "1.2.3.4a", userAgent: "b", apiKey: null });
    expect(a).not.toBe(b);
  });

  it("differs when a character moves from the apiKey to the userAgent", () => {
    const a = clientFingerprint({ ip: null, userAgent: "ua", apiKey: "xkey" });
    const b = clientFingerprint({ ip: null, userAgent: "uax", apiKey: "key" });
    expect(a).not.toBe(b);
  });

  it("differs when the same text sits in a different field", () => {
    const a = clientFingerprint({ ip: "x", userAgent: null, apiKey: null });
    const b = clientFingerprint({ ip: null, userAgent: "x", apiKey: null });
    const c = clientFingerprint({ ip: null, userAgent: null, apiKey: "x" });
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('differs when a ":" moves across a field boundary', () => {
    const a = clientFingerprint({ ip: "1", userAgent: "1:a", apiKey: null });
    const b = clientFingerprint({ ip: "1:1", userAgent: "a", apiKey: null });
    expect(a).not.toBe(b);
  });

  it("gives the CLIENT bucket of two callers that differ only by field boundaries two keys", () => {
    expect(keyOf(["CLIENT"], { ip: "1.2.3.4", userAgent: "ab" })).not.toBe(keyOf(["CLIENT"], { ip: "1.2.3.4a", userAgent: "b" }));
  });

  it("maps distinct (ip, userAgent, apiKey) triples to distinct fingerprints", () => {
    const unit = fc.constantFrom("1", "2", ":", "a", ".");
    const field = fc.option(fc.string({ unit, minLength: 1, maxLength: 5 }), { nil: null });
    const triples = fc.uniqueArray(fc.record({ ip: field, userAgent: field, apiKey: field }), {
      minLength: 2,
      maxLength: 100,
      selector: (t) => JSON.stringify([t.ip, t.userAgent, t.apiKey]),
    });
    fc.assert(
      fc.property(triples, (list) => {
        expect(new Set(list.map(clientFingerprint)).size).toBe(list.length);
      }),
      { numRuns: 200 },
    );
  });
});

describe("clientFingerprint with a cookie", () => {
  const caller = { ip: "1.2.3.4", userAgent: "curl/8.0", apiKey: "secret" };

  it("keeps the fingerprint it had before cookies, for a request without one: its CLIENT bucket stays the same", () => {
    const before = hash22(["1.2.3.4", "curl/8.0", "secret"].map((part) => `${part.length}:${part}`).join(""));
    expect(clientFingerprint({ ...caller, cookie: null })).toBe(before);
    expect(keyOf(["CLIENT"], caller)).toBe(`client:${before}`);
  });

  it("differs when a cookie is added, and when it changes", () => {
    const without = clientFingerprint({ ...caller, cookie: null });
    const withOne = clientFingerprint({ ...caller, cookie: "session-1" });
    expect(withOne).not.toBe(without);
    expect(clientFingerprint({ ...caller, cookie: "session-2" })).not.toBe(withOne);
  });

  it("keys CLIENT with only a cookie, and never shows the cookie", () => {
    const key = keyOf(["CLIENT"], { cookie: "sid=very-secret" });
    expect(key).toMatch(/^client:[A-Za-z0-9_-]{22}$/);
    expect(key).not.toContain("very-secret");
  });

  it("maps distinct (ip, userAgent, apiKey, cookie) quadruples to distinct fingerprints", () => {
    const unit = fc.constantFrom("1", "2", ":", "a", ".");
    const field = fc.option(fc.string({ unit, minLength: 1, maxLength: 5 }), { nil: null });
    const quadruples = fc.uniqueArray(fc.record({ ip: field, userAgent: field, apiKey: field, cookie: field }), {
      minLength: 2,
      maxLength: 100,
      selector: (t) => JSON.stringify([t.ip, t.userAgent, t.apiKey, t.cookie]),
    });
    fc.assert(
      fc.property(quadruples, (list) => {
        expect(new Set(list.map(clientFingerprint)).size).toBe(list.length);
      }),
      { numRuns: 200 },
    );
  });
});

describe("compileBucketKey with attribute keys", () => {
  const keyWith = (rule: { tenantId?: string; scope?: Dimension[]; attributeKeys: string[] }, fields: Partial<CheckRequest>) =>
    compileBucketKey({ tenantId: rule.tenantId ?? "acme", scope: rule.scope ?? [], attributeKeys: rule.attributeKeys })(makeTenantOnlyCheckRequest(fields));
  const attributes = (entries: Record<string, string>) => new Map(Object.entries(entries));

  it("labels each attribute after the dimensions, sorted by key", () => {
    const fields = { userId: "u1", attributes: attributes({ route_group: "search", plan: "pro" }) };
    expect(keyWith({ scope: ["USER"], attributeKeys: ["route_group", "plan"] }, fields)).toBe("user:u1|attr.plan:pro|attr.route_group:search");
    expect(keyWith({ scope: ["USER"], attributeKeys: ["plan", "route_group"] }, fields)).toBe("user:u1|attr.plan:pro|attr.route_group:search");
  });

  it("keys by attributes alone", () => {
    expect(keyWith({ attributeKeys: ["plan"] }, { attributes: attributes({ plan: "free" }) })).toBe("attr.plan:free");
  });

  it("returns null when the request lacks an attribute the rule is keyed by", () => {
    expect(keyWith({ scope: ["USER"], attributeKeys: ["plan"] }, { userId: "u1" })).toBeNull();
  });

  it("escapes attribute values as it escapes dimensions", () => {
    expect(keyWith({ attributeKeys: ["plan"] }, { attributes: attributes({ plan: "a|b%" }) })).toBe("attr.plan:a%7Cb%25");
  });

  it("keys a rule of every tenant by tenant too when it is keyed by attributes only", () => {
    expect(keyWith({ tenantId: "*", attributeKeys: ["plan"] }, { tenantId: "globex", attributes: attributes({ plan: "free" }) })).toBe("tenant:globex|attr.plan:free");
  });

  it("leaves the keys of rules without attribute keys as they were, whatever the request's attributes", () => {
    expect(keyWith({ scope: ["USER"], attributeKeys: [] }, { userId: "u1", attributes: attributes({ plan: "pro" }) })).toBe("user:u1");
    expect(keyWith({ attributeKeys: [] }, { attributes: attributes({ plan: "pro" }) })).toBe(WHOLE_RULE_KEY);
  });

  it("maps distinct requests to distinct keys across dimensions and attributes, values built to look like labels and separators", () => {
    const unit = fc.constantFrom("a", "|", "%", ":", "7", "C", "attr.", "user:", "ip:", "k");
    const value = fc.string({ unit, minLength: 1, maxLength: 6 });
    const request = fc.record({ userId: fc.option(value, { nil: null }), k: fc.option(value), ka: fc.option(value) });
    const rule = { tenantId: "*", scope: ["USER"] as Dimension[], attributeKeys: ["k", "k.a"] };
    const keyOfRequest = compileBucketKey(rule);
    const of = (r: { userId: string | null; k: string | null; ka: string | null }) => {
      const entries: [string, string][] = [];
      if (r.k !== null) entries.push(["k", r.k]);
      if (r.ka !== null) entries.push(["k.a", r.ka]);
      return keyOfRequest(makeTenantOnlyCheckRequest({ tenantId: "acme", userId: r.userId, attributes: new Map(entries) }));
    };
    fc.assert(
      fc.property(request, request, (first, second) => {
        fc.pre(JSON.stringify(first) !== JSON.stringify(second));
        const a = of(first);
        const b = of(second);
        if (a !== null || b !== null) expect(a).not.toBe(b);
      }),
      { numRuns: 3000 },
    );
  });
});
