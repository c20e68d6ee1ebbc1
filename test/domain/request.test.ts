import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/domain/errors.js";
import { LIMITS, parseCheckRequest, type CheckRequestInput } from "../../src/domain/request.js";

function rejection(input: CheckRequestInput, field?: string): ValidationError {
  try {
    parseCheckRequest(input, field);
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

const base = { tenantId: "acme" } as const;

describe("parseCheckRequest defaults", () => {
  it("fills every optional field for a tenant-only request", () => {
    expect(parseCheckRequest(base)).toEqual({
      tenantId: "acme",
      userId: null,
      ip: null,
      apiKey: null,
      userAgent: null,
      resource: null,
      method: null,
      cost: 1,
      dryRun: false,
    });
  });

  it("treats explicit nulls as absent", () => {
    expect(
      parseCheckRequest({
        tenantId: "acme",
        userId: null,
        ip: null,
        apiKey: null,
        userAgent: null,
        resource: null,
        method: null,
        cost: null,
        dryRun: null,
      }),
    ).toEqual(parseCheckRequest(base));
  });

  it('treats "" as absent in every optional string field', () => {
    const parsed = parseCheckRequest({ tenantId: "acme", userId: "", ip: "", apiKey: "", userAgent: "", resource: "", method: "" });
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

  it('rejects tenantId "*"', () => {
    expect(rejection({ tenantId: "*" }).message).toBe('request.tenantId cannot be "*": a request comes from one tenant');
  });

  it("names the field under the given prefix", () => {
    const error = rejection({ tenantId: "" }, "requests[3]");
    expect(error.field).toBe("requests[3].tenantId");
    expect(error.message).toBe("requests[3].tenantId must not be empty");
  });

  it(`accepts ${LIMITS.tenantId} characters`, () => {
    const tenantId = "t".repeat(LIMITS.tenantId);
    expect(parseCheckRequest({ tenantId }).tenantId).toBe(tenantId);
  });

  it(`rejects more than ${LIMITS.tenantId} characters`, () => {
    expect(rejection({ tenantId: "t".repeat(129) }).message).toBe("request.tenantId must be at most 128 characters (got 129)");
  });

  it("rejects a 10 KB tenantId", () => {
    expect(rejection({ tenantId: "t".repeat(10_240) }).message).toBe("request.tenantId must be at most 128 characters (got 10240)");
  });

  it("rejects control characters", () => {
    expect(rejection({ tenantId: "ac\nme" }).message).toBe("request.tenantId must not contain control characters");
  });
});

describe("parseCheckRequest identifiers", () => {
  it("rejects a 10 KB userId", () => {
    const error = rejection({ ...base, userId: "u".repeat(10_240) });
    expect(error.field).toBe("request.userId");
    expect(error.message).toBe("request.userId must be at most 256 characters (got 10240)");
  });

  it("rejects a 10 KB apiKey", () => {
    expect(rejection({ ...base, apiKey: "k".repeat(10_240) }).message).toBe(
      "request.apiKey must be at most 256 characters (got 10240)",
    );
  });

  it("rejects a 10 KB userAgent", () => {
    expect(rejection({ ...base, userAgent: "a".repeat(10_240) }).message).toBe(
      "request.userAgent must be at most 1024 characters (got 10240)",
    );
  });

  it("rejects a 10 KB resource", () => {
    expect(rejection({ ...base, resource: "/" + "r".repeat(10_239) }).message).toBe(
      "request.resource must be at most 2048 characters (got 10240)",
    );
  });

  it("rejects a 10 KB ip before trying to parse it", () => {
    expect(rejection({ ...base, ip: "1".repeat(10_240) }).message).toBe("request.ip must be at most 64 characters (got 10240)");
  });

  it(`accepts a userId of exactly ${LIMITS.identifier} characters`, () => {
    const userId = "u".repeat(LIMITS.identifier);
    expect(parseCheckRequest({ ...base, userId }).userId).toBe(userId);
  });

  it(`accepts a userAgent of exactly ${LIMITS.userAgent} characters`, () => {
    const userAgent = "a".repeat(LIMITS.userAgent);
    expect(parseCheckRequest({ ...base, userAgent }).userAgent).toBe(userAgent);
  });

  it("accepts unicode identifiers unchanged", () => {
    const parsed = parseCheckRequest({ tenantId: "société", userId: "用户-😀", apiKey: "ключ", userAgent: "Müller/1.0 (ü)" });
    expect(parsed).toMatchObject({ tenantId: "société", userId: "用户-😀", apiKey: "ключ", userAgent: "Müller/1.0 (ü)" });
  });

  it("does not normalise unicode forms", () => {
    const decomposed = "e\u0301";
    expect(parseCheckRequest({ ...base, userId: decomposed }).userId).toBe(decomposed);
  });

  it("accepts spaces inside a userAgent", () => {
    expect(parseCheckRequest({ ...base, userAgent: "Mozilla/5.0 (X11; Linux)" }).userAgent).toBe("Mozilla/5.0 (X11; Linux)");
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

  it("accepts the maximum 1_000_000", () => {
    expect(parseCheckRequest({ ...base, cost: 1_000_000 }).cost).toBe(1_000_000);
  });

  it("accepts 1", () => {
    expect(parseCheckRequest({ ...base, cost: 1 }).cost).toBe(1);
  });

  it("names the field under the given prefix", () => {
    const error = rejection({ ...base, cost: 0 }, "requests[3]");
    expect(error.field).toBe("requests[3].cost");
    expect(error.message).toBe("requests[3].cost must be an integer from 1 to 1000000 (got 0)");
  });
});

describe("parseCheckRequest resource", () => {
  it("keeps a plain path", () => {
    expect(parseCheckRequest({ ...base, resource: "/api/v1/orders" }).resource).toBe("/api/v1/orders");
  });

  it('rejects a resource without a leading "/"', () => {
    const error = rejection({ ...base, resource: "api/v1" });
    expect(error.field).toBe("request.resource");
    expect(error.message).toBe('request.resource must be a path starting with "/" (got "api/v1")');
  });

  it("rejects a full URL", () => {
    expect(rejection({ ...base, resource: "https://example.com/a" }).message).toBe(
      'request.resource must be a path starting with "/" (got "https://example.com/a")',
    );
  });

  it("quotes at most 40 characters of a rejected resource", () => {
    expect(rejection({ ...base, resource: "x".repeat(100) }).message).toBe(
      `request.resource must be a path starting with "/" (got "${"x".repeat(40)}")`,
    );
  });

  it("strips the query string and the fragment", () => {
    expect(parseCheckRequest({ ...base, resource: "/a/b?x=1#f" }).resource).toBe("/a/b");
  });

  it("strips a query string", () => {
    expect(parseCheckRequest({ ...base, resource: "/a/b?x=1&y=/c" }).resource).toBe("/a/b");
  });

  it("strips a fragment", () => {
    expect(parseCheckRequest({ ...base, resource: "/a/b#x?y" }).resource).toBe("/a/b");
  });

  it('leaves "/" when the query string starts right after it', () => {
    expect(parseCheckRequest({ ...base, resource: "/?q=1" }).resource).toBe("/");
  });

  it.each([
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

  it("rejects control characters", () => {
    expect(rejection({ ...base, resource: "/a\nb" }).message).toBe("request.resource must not contain control characters");
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
  it("accepts an IPv4 address unchanged", () => {
    expect(parseCheckRequest({ ...base, ip: "192.168.1.20" }).ip).toBe("192.168.1.20");
  });

  it.each(["not-an-ip", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4 ", "1.2.3.4/24", "2001:db8::g"])("rejects %j", (ip) => {
    const error = rejection({ ...base, ip });
    expect(error.field).toBe("request.ip");
    expect(error.message).toBe(`request.ip must be an IPv4 or IPv6 address (got ${JSON.stringify(ip)})`);
  });

  it("canonicalises an IPv6 address", () => {
    expect(parseCheckRequest({ ...base, ip: "2001:DB8:0:0:0:0:0:1" }).ip).toBe("2001:db8::1");
  });

  it("keeps a canonical IPv6 address unchanged", () => {
    expect(parseCheckRequest({ ...base, ip: "2001:db8::1" }).ip).toBe("2001:db8::1");
  });

  it("canonicalises the IPv6 loopback", () => {
    expect(parseCheckRequest({ ...base, ip: "0:0:0:0:0:0:0:1" }).ip).toBe("::1");
  });

  it("turns an IPv4-mapped IPv6 address in dotted form into IPv4", () => {
    expect(parseCheckRequest({ ...base, ip: "::ffff:10.0.0.1" }).ip).toBe("10.0.0.1");
  });

  it("turns an IPv4-mapped IPv6 address in hex form into IPv4", () => {
    expect(parseCheckRequest({ ...base, ip: "::FFFF:a00:1" }).ip).toBe("10.0.0.1");
  });

  it("turns the fully written IPv4-mapped form into IPv4", () => {
    expect(parseCheckRequest({ ...base, ip: "0:0:0:0:0:ffff:c0a8:0114" }).ip).toBe("192.168.1.20");
  });

  it("gives the mapped and the plain spelling of an address the same value", () => {
    const mapped = parseCheckRequest({ ...base, ip: "::ffff:255.255.255.255" }).ip;
    expect(mapped).toBe(parseCheckRequest({ ...base, ip: "255.255.255.255" }).ip);
  });

  it("drops an IPv6 zone identifier", () => {
    expect(parseCheckRequest({ ...base, ip: "fe80::1%eth0" }).ip).toBe("fe80::1");
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
