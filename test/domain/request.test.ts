import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ValidationError } from "../../src/domain/errors.js";
import { foldPathCase } from "../../src/domain/glob.js";
import { parseCheckRequest, type CheckRequestInput } from "../../src/domain/request.js";
import { LENGTHS } from "../../src/domain/service-limits.js";
import { makeTenantOnlyCheckRequest } from "../support/domain-factory.js";
import { validationErrorOf } from "../support/validation-error.js";

function rejection(input: CheckRequestInput, field?: string): ValidationError {
  return validationErrorOf(() => parseCheckRequest(input, field), input);
}

const base = { tenantId: "acme" } as const;

describe("parseCheckRequest defaults", () => {
  it("fills every optional field for a tenant-only request", () => {
    expect(parseCheckRequest(base)).toEqual(makeTenantOnlyCheckRequest());
  });

  it("treats explicit nulls as absent", () => {
    const nulls = { userId: null, ip: null, apiKey: null, userAgent: null, resource: null, method: null, cost: null, dryRun: null };
    expect(parseCheckRequest({ ...base, ...nulls })).toEqual(parseCheckRequest(base));
  });

  it('treats "" as absent in every optional string field', () => {
    const parsed = parseCheckRequest({ tenantId: "acme", userId: "", ip: "", apiKey: "", userAgent: "", cookie: "", resource: "", method: "" });
    expect(parsed).toEqual(parseCheckRequest(base));
  });

  it("keeps dryRun true", () => {
    expect(parseCheckRequest({ ...base, dryRun: true }).dryRun).toBe(true);
  });

  it("keeps the given fields unchanged", () => {
    const parsed = parseCheckRequest({ tenantId: "acme", userId: "u42", apiKey: "k-1", userAgent: "curl/8.0", cost: 7 });
    expect(parsed).toMatchObject({ userId: "u42", apiKey: "k-1", userAgent: "curl/8.0", cost: 7 });
  });
});

describe("parseCheckRequest tenantId", () => {
  it("rejects an empty tenantId", () => {
    const error = rejection({ tenantId: "" });
    expect(error.field).toBe("request.tenantId");
    expect(error.message).toBe("request.tenantId must not be empty");
  });

  it("names the field under the given prefix", () => {
    const error = rejection({ tenantId: "" }, "requests[3]");
    expect(error.field).toBe("requests[3].tenantId");
    expect(error.message).toBe("requests[3].tenantId must not be empty");
  });

  it(`accepts ${LENGTHS.tenantId} characters`, () => {
    const tenantId = "t".repeat(LENGTHS.tenantId);
    expect(parseCheckRequest({ tenantId }).tenantId).toBe(tenantId);
  });

  it.each([
    ['rejects tenantId "*"', "*", 'request.tenantId cannot be "*": a request comes from one tenant'],
    [`rejects more than ${LENGTHS.tenantId} characters`, "t".repeat(129), "request.tenantId must be at most 128 characters (got 129)"],
    ["rejects a 10 KB tenantId", "t".repeat(10_240), "request.tenantId must be at most 128 characters (got 10240)"],
    ["rejects control characters", "ac\nme", "request.tenantId must not contain control characters"],
  ])("%s", (_, tenantId, message) => {
    expect(rejection({ tenantId }).message).toBe(message);
  });
});

describe("parseCheckRequest identifiers", () => {
  it.each([
    ["rejects a 10 KB userId", "userId", "u".repeat(10_240), "request.userId must be at most 256 characters (got 10240)"],
    ["rejects a 10 KB apiKey", "apiKey", "k".repeat(10_240), "request.apiKey must be at most 256 characters (got 10240)"],
    ["rejects a 10 KB userAgent", "userAgent", "a".repeat(10_240), "request.userAgent must be at most 1024 characters (got 10240)"],
    ["rejects a 10 KB resource", "resource", "/" + "r".repeat(10_239), "request.resource must be at most 2048 characters (got 10240)"],
    ["rejects a 10 KB ip before trying to parse it", "ip", "1".repeat(10_240), "request.ip must be at most 64 characters (got 10240)"],
    ["rejects a 10 KB cookie", "cookie", "c".repeat(10_240), "request.cookie must be at most 4096 characters (got 10240)"],
  ] as const)("%s", (_, field, value, message) => {
    const error = rejection({ ...base, [field]: value });
    expect(error.field).toBe(`request.${field}`);
    expect(error.message).toBe(message);
  });

  it.each([
    [`accepts a userId of exactly ${LENGTHS.identifier} characters`, "userId", "u".repeat(LENGTHS.identifier)],
    [`accepts a userAgent of exactly ${LENGTHS.userAgent} characters`, "userAgent", "a".repeat(LENGTHS.userAgent)],
    ["does not normalise unicode forms", "userId", "e\u0301"],
    ["accepts spaces inside a userAgent", "userAgent", "Mozilla/5.0 (X11; Linux)"],
    [`accepts a cookie of exactly ${LENGTHS.cookie} characters`, "cookie", "c".repeat(LENGTHS.cookie)],
  ] as const)("%s", (_, field, value) => {
    expect(parseCheckRequest({ ...base, [field]: value })[field]).toBe(value);
  });

  it("accepts unicode identifiers unchanged", () => {
    const parsed = parseCheckRequest({ tenantId: "société", userId: "用户-😀", apiKey: "ключ", userAgent: "Müller/1.0 (ü)" });
    expect(parsed).toMatchObject({ tenantId: "société", userId: "用户-😀", apiKey: "ключ", userAgent: "Müller/1.0 (ü)" });
  });

  it.each([
    ["userId", "u\u0000"],
    ["userId", "u\t1"],
    ["apiKey", "k\r\n"],
    ["userAgent", "agent\u001b[31m"],
    ["userAgent", "agent\u007f"],
    ["userId", "u\u0085"],
    ["userId", "u\u2028"],
    ["userId", "admin\u202e"],
    ["apiKey", "k\u2066"],
    ["userId", "u\ud800"],
    ["cookie", "sid\r\nSet-Cookie: x"],
  ] as const)("rejects control characters in %s (%j)", (field, value) => {
    const error = rejection({ ...base, [field]: value });
    expect(error.field).toBe(`request.${field}`);
    expect(error.message).toBe(`request.${field} must not contain control characters`);
  });

  it("names the field under the given prefix", () => {
    expect(rejection({ ...base, userId: "\u0001" }, "requests[3]").field).toBe("requests[3].userId");
  });
});

describe("parseCheckRequest cost", () => {
  it.each([0, -1, 1.5, 2 ** 31, 1_000_001, Number.NaN, Number.POSITIVE_INFINITY])("rejects %s", (cost) => {
    const error = rejection({ ...base, cost });
    expect(error.field).toBe("request.cost");
    expect(error.message).toBe(`request.cost must be an integer from 1 to 1000000 (got ${cost})`);
  });

  it.each([
    ["accepts the maximum 1_000_000", 1_000_000],
    ["accepts 1", 1],
  ])("%s", (_, cost) => {
    expect(parseCheckRequest({ ...base, cost }).cost).toBe(cost);
  });

  it("names the field under the given prefix", () => {
    const error = rejection({ ...base, cost: 0 }, "requests[3]");
    expect(error.field).toBe("requests[3].cost");
    expect(error.message).toBe("requests[3].cost must be an integer from 1 to 1000000 (got 0)");
  });
});

describe("parseCheckRequest resource", () => {
  it('rejects a resource without a leading "/"', () => {
    const error = rejection({ ...base, resource: "api/v1" });
    expect(error.field).toBe("request.resource");
    expect(error.message).toBe('request.resource must be a path starting with "/" (got "api/v1")');
  });

  it.each([
    ["rejects a full URL", "https://example.com/a", 'request.resource must be a path starting with "/" (got "https://example.com/a")'],
    ["quotes at most 40 characters of a rejected resource", "x".repeat(100), `request.resource must be a path starting with "/" (got "${"x".repeat(40)}")`],
    ["rejects control characters", "/a\nb", "request.resource must not contain control characters"],
  ])("%s", (_, resource, message) => {
    expect(rejection({ ...base, resource }).message).toBe(message);
  });

  it.each([
    ["/api/v1/orders", "/api/v1/orders"],
    // A query string and a fragment are cut off, whichever of them comes first.
    ["/a/b?x=1#f", "/a/b"],
    ["/a/b?x=1&y=/c", "/a/b"],
    ["/a/b#x?y", "/a/b"],
    ["/?q=1", "/"],
    ["/api//v1///orders", "/api/v1/orders"],
    ["/api/v1/./orders", "/api/v1/orders"],
    ["/api/v2/../v1/orders", "/api/v1/orders"],
    ["/../../etc/passwd", "/etc/passwd"],
    ["/api/v1/orders/", "/api/v1/orders"],
    ["//", "/"],
    ["/a/%2F/b", "/a/%2F/b"],
  ])("normalises %s to %s", (resource, normalised) => {
    expect(parseCheckRequest({ ...base, resource }).resource).toBe(normalised);
  });

  it("normalises any path as the definition does: canonical paths are returned as they are, the others rebuilt segment by segment", () => {
    // The definition: empty and "." segments dropped, ".." dropping the segment kept before it.
    const definition = (path: string) =>
      `/${path
        .split("/")
        .reduce<string[]>((kept, segment) => (segment === ".." ? kept.slice(0, -1) : segment === "" || segment === "." ? kept : [...kept, segment]), [])
        .join("/")}`;
    const path = fc.array(fc.constantFrom("/", ".", "a", "%"), { maxLength: 12 }).map((characters) => `/${characters.join("")}`);
    fc.assert(fc.property(path, (resource) => parseCheckRequest({ ...base, resource }).resource === definition(resource)), { numRuns: 5_000 });
  });
});

describe("parseCheckRequest ignorePathCase", () => {
  it("is false by default, and keeps the path as spelt either way (rules and ENDPOINT keys fold it)", () => {
    expect(parseCheckRequest({ ...base, resource: "/API/getUser" })).toMatchObject({ resource: "/API/getUser", ignorePathCase: false });
    expect(parseCheckRequest({ ...base, resource: "/API//v1/./GetUser/?Q=A", ignorePathCase: true })).toMatchObject({ resource: "/API/v1/GetUser", ignorePathCase: true });
  });
});

describe("foldPathCase", () => {
  it("lower-cases as toLowerCase does, with every sigma one", () => {
    expect(foldPathCase("/API/v1/GetUser")).toBe("/api/v1/getuser");
    expect(foldPathCase("/\u0130D/%2E%2E")).toBe("/i\u0307d/%2e%2e");
    // toLowerCase gives a word-final capital sigma as "ς": folded, every sigma is "σ".
    expect(foldPathCase("/ΑΣ/ας/ΟΔΟΣ")).toBe("/ασ/ασ/οδοσ");
  });
});

describe("parseCheckRequest method", () => {
  it.each(["get", "Get", "GET", "gEt"])("normalises %s to GET", (method) => {
    expect(parseCheckRequest({ ...base, method }).method).toBe("GET");
  });

  it.each(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])("accepts %s", (method) => {
    expect(parseCheckRequest({ ...base, method: method.toLowerCase() }).method).toBe(method);
  });

  it("rejects an unknown method", () => {
    const error = rejection({ ...base, method: "fetch" });
    expect(error.field).toBe("request.method");
    expect(error.message).toBe(
      'request.method must be one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH (got "fetch")',
    );
  });

  it("quotes at most 20 characters of an unknown method", () => {
    expect(rejection({ ...base, method: "M".repeat(50) }).message).toBe(
      `request.method must be one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH (got "${"M".repeat(20)}")`,
    );
  });

  it("rejects a method with surrounding spaces", () => {
    expect(rejection({ ...base, method: " GET" }).field).toBe("request.method");
  });
});

describe("parseCheckRequest ip", () => {
  it.each([
    ["accepts an IPv4 address unchanged", "192.168.1.20", "192.168.1.20"],
    ["canonicalises an IPv6 address", "2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["keeps a canonical IPv6 address unchanged", "2001:db8::1", "2001:db8::1"],
    ["canonicalises the IPv6 loopback", "0:0:0:0:0:0:0:1", "::1"],
    ["turns an IPv4-mapped IPv6 address in dotted form into IPv4", "::ffff:10.0.0.1", "10.0.0.1"],
    ["turns an IPv4-mapped IPv6 address in hex form into IPv4", "::FFFF:a00:1", "10.0.0.1"],
    ["turns the fully written IPv4-mapped form into IPv4", "0:0:0:0:0:ffff:c0a8:0114", "192.168.1.20"],
    ["drops an IPv6 zone identifier", "fe80::1%eth0", "fe80::1"],
  ])("%s", (_, ip, parsed) => {
    expect(parseCheckRequest({ ...base, ip }).ip).toBe(parsed);
  });

  it.each(["not-an-ip", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4 ", "1.2.3.4/24", "2001:db8::g"])("rejects %j", (ip) => {
    const error = rejection({ ...base, ip });
    expect(error.field).toBe("request.ip");
    expect(error.message).toBe(`request.ip must be an IPv4 or IPv6 address (got ${JSON.stringify(ip)})`);
  });

  it("gives the mapped and the plain spelling of an address the same value", () => {
    const mapped = parseCheckRequest({ ...base, ip: "::ffff:255.255.255.255" }).ip;
    expect(mapped).toBe(parseCheckRequest({ ...base, ip: "255.255.255.255" }).ip);
  });

  it("names the field under the given prefix", () => {
    expect(rejection({ ...base, ip: "x" }, "requests[3]").field).toBe("requests[3].ip");
  });

  it("gives every IPv4-mapped IPv6 address the IPv4 spelling", () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        expect(parseCheckRequest({ ...base, ip: `::ffff:${ip}` }).ip).toBe(parseCheckRequest({ ...base, ip }).ip);
      }),
    );
  });

  it("canonicalises idempotently", () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (ip) => {
        const once = parseCheckRequest({ ...base, ip }).ip!;
        expect(parseCheckRequest({ ...base, ip: once }).ip).toBe(once);
      }),
      { numRuns: 2000 },
    );
  });

  it("gives upper- and lower-case spellings of an IPv6 address the same value", () => {
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        expect(parseCheckRequest({ ...base, ip: ip.toUpperCase() }).ip).toBe(parseCheckRequest({ ...base, ip: ip.toLowerCase() }).ip);
      }),
      { numRuns: 2000 },
    );
  });
});
