import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/domain/errors.js";
import { compileGlob, MAX_GLOB_LENGTH, MAX_GLOB_SEGMENTS } from "../../src/domain/glob.js";
import { validationErrorOf } from "../support/validation-error.js";

function rejection(source: string, field?: string): ValidationError {
  return validationErrorOf(() => compileGlob(source, field), source);
}

function matches(pattern: string, path: string): boolean {
  return compileGlob(pattern).matches(path);
}

describe("compileGlob matching", () => {
  describe("exact paths", () => {
    it("matches the identical path", () => {
      expect(matches("/api/v1/orders", "/api/v1/orders")).toBe(true);
    });

    it("does not match a longer path", () => {
      expect(matches("/api/v1/orders", "/api/v1/orders/7")).toBe(false);
    });

    it("does not match a shorter path", () => {
      expect(matches("/api/v1/orders", "/api/v1")).toBe(false);
    });

    it("does not match a path that differs in one segment", () => {
      expect(matches("/api/v1/orders", "/api/v2/orders")).toBe(false);
    });

    it("is case-sensitive", () => {
      expect(matches("/api/Orders", "/api/orders")).toBe(false);
    });

    it("does not treat a trailing slash as the same path", () => {
      expect(matches("/api/orders", "/api/orders/")).toBe(false);
    });

    it("treats a segment prefix as a different segment", () => {
      expect(matches("/api/order", "/api/orders")).toBe(false);
    });

    it("matches the root pattern only against the root path", () => {
      expect(matches("/", "/")).toBe(true);
      expect(matches("/", "/a")).toBe(false);
    });

    it("treats regular-expression metacharacters literally", () => {
      expect(matches("/a.b/(c)+/[d]", "/a.b/(c)+/[d]")).toBe(true);
      expect(matches("/a.b", "/axb")).toBe(false);
    });
  });

  describe("* as a whole segment", () => {
    it("matches any single segment", () => {
      expect(matches("/api/v1/*", "/api/v1/orders")).toBe(true);
    });

    it("never crosses a slash", () => {
      expect(matches("/api/v1/*", "/api/v1/orders/7")).toBe(false);
    });

    it("requires the segment to be present", () => {
      expect(matches("/api/v1/*", "/api/v1")).toBe(false);
    });

    it("matches an empty trailing segment", () => {
      expect(matches("/api/v1/*", "/api/v1/")).toBe(true);
    });

    it("works in the middle of a pattern", () => {
      expect(matches("/users/*/orders", "/users/42/orders")).toBe(true);
      expect(matches("/users/*/orders", "/users/42/43/orders")).toBe(false);
    });
  });

  describe("** as a whole segment", () => {
    it("matches zero segments", () => {
      expect(matches("/api/**", "/api")).toBe(true);
    });

    it("matches one segment", () => {
      expect(matches("/api/**", "/api/x")).toBe(true);
    });

    it("matches many segments", () => {
      expect(matches("/api/**", "/api/x/y")).toBe(true);
    });

    it("does not match a different prefix", () => {
      expect(matches("/api/**", "/apix")).toBe(false);
      expect(matches("/api/**", "/other/api")).toBe(false);
    });

    it("matches every path when it is the whole pattern", () => {
      expect(matches("/**", "/")).toBe(true);
      expect(matches("/**", "/a/b/c")).toBe(true);
    });

    it("matches zero or more segments in the middle of a pattern", () => {
      expect(matches("/a/**/z", "/a/z")).toBe(true);
      expect(matches("/a/**/z", "/a/b/z")).toBe(true);
      expect(matches("/a/**/z", "/a/b/c/d/z")).toBe(true);
      expect(matches("/a/**/z", "/a/b/c/d")).toBe(false);
    });

    it("backtracks to find a later occurrence of the segment after it", () => {
      expect(matches("/**/x/y", "/x/a/x/y")).toBe(true);
      expect(matches("/**/x/y", "/x/a/x/z")).toBe(false);
    });

    it("combines with * segments", () => {
      expect(matches("/**/*/end", "/end")).toBe(false);
      expect(matches("/**/*/end", "/a/end")).toBe(true);
      expect(matches("/**/*/end", "/a/b/c/end")).toBe(true);
    });

    it("allows consecutive ** segments", () => {
      expect(matches("/**/**", "/")).toBe(true);
      expect(matches("/a/**/**/b", "/a/b")).toBe(true);
      expect(matches("/a/**/**/b", "/a/x/y/b")).toBe(true);
    });
  });

  describe("* and ? inside a segment", () => {
    it("matches a suffix with *", () => {
      expect(matches("/files/*.pdf", "/files/report.pdf")).toBe(true);
    });

    it("matches an empty run with *", () => {
      expect(matches("/files/*.pdf", "/files/.pdf")).toBe(true);
    });

    it("rejects a different suffix", () => {
      expect(matches("/files/*.pdf", "/files/report.pdfx")).toBe(false);
      expect(matches("/files/*.pdf", "/files/report.txt")).toBe(false);
    });

    it("does not let * inside a segment cross a slash", () => {
      expect(matches("/files/*.pdf", "/files/a/b.pdf")).toBe(false);
    });

    it("matches exactly one character with ?", () => {
      expect(matches("/v?/items", "/v1/items")).toBe(true);
      expect(matches("/v?/items", "/v/items")).toBe(false);
      expect(matches("/v?/items", "/v12/items")).toBe(false);
    });

    it("does not let ? match a slash", () => {
      expect(matches("/a?b", "/a/b")).toBe(false);
    });

    it("matches several stars in one segment", () => {
      expect(matches("/*-*-*", "/a-b-c")).toBe(true);
      expect(matches("/*-*-*", "/a-b")).toBe(false);
      expect(matches("/*-*-*", "/--")).toBe(true);
    });

    it("backtracks within a segment", () => {
      expect(matches("/*ab", "/aab")).toBe(true);
      expect(matches("/*ab*cd", "/xabyabzcd")).toBe(true);
      expect(matches("/*ab*cd", "/xabyabzc")).toBe(false);
    });

    it("matches a prefix pattern", () => {
      expect(matches("/img-*", "/img-1")).toBe(true);
      expect(matches("/img-*", "/im-1")).toBe(false);
    });
  });

  describe("pathological patterns", () => {
    const manyStars = "/" + "*a".repeat(50);

    it("rejects a long path that lacks the final character", () => {
      expect(matches(manyStars, "/" + "a".repeat(2000) + "b")).toBe(false);
    });

    it("rejects a path with one fewer required character", () => {
      expect(matches(manyStars, "/" + "a".repeat(49))).toBe(false);
    });

    it("accepts a path with exactly the required characters", () => {
      expect(matches(manyStars, "/" + "a".repeat(50))).toBe(true);
    });

    it("accepts a long path with the required characters spread out", () => {
      expect(matches(manyStars, "/" + "ba".repeat(1000))).toBe(true);
    });

    it("rejects 1000 segments lacking the final literal after many **", () => {
      expect(matches("/**/**/**/**/**/x", "/a".repeat(1000))).toBe(false);
    });

    it("accepts 1000 segments ending in the final literal after many **", () => {
      expect(matches("/**/**/**/**/**/x", "/a".repeat(999) + "/x")).toBe(true);
    });

    it("rejects a long path where each ** needs a distinct literal that appears too few times", () => {
      expect(matches("/**/a/**/a/**/a/**/b", "/a".repeat(1000))).toBe(false);
    });
  });
});

describe("compileGlob against a regular-expression reference", () => {
  function referenceRegExp(pattern: string): RegExp {
    const body = pattern
      .split("/")
      .slice(1)
      .map((part) =>
        part === "**"
          ? "(?:/[^/]*)*"
          : "/" + [...part].map((c) => (c === "*" ? "[^/]*" : c === "?" ? "[^/]" : c)).join(""),
      )
      .join("");
    return new RegExp(`^${body}$`);
  }

  // Globs and request paths are both normalised: no empty segments.
  const patternSegment = fc.oneof(
    fc.constant("**"),
    fc.string({ unit: fc.constantFrom("a", "b", "*", "?"), minLength: 1, maxLength: 4 }).filter((s) => !s.includes("**")),
  );
  const pathSegment = fc.string({ unit: fc.constantFrom("a", "b"), minLength: 1, maxLength: 3 });
  const pattern = fc.array(patternSegment, { minLength: 1, maxLength: 6 }).map((parts) => "/" + parts.join("/"));
  const path = fc.array(pathSegment, { minLength: 1, maxLength: 7 }).map((parts) => "/" + parts.join("/"));

  it("agrees with the reference on random patterns and paths", () => {
    fc.assert(
      fc.property(pattern, path, (source, target) => {
        expect(compileGlob(source).matches(target)).toBe(referenceRegExp(source).test(target));
      }),
      { numRuns: 5000 },
    );
  });
});

describe("compileGlob normalisation", () => {
  it.each([
    ["/api//v1/", "/api/v1"],
    ["//api/**/", "/api/**"],
    ["/", "/"],
  ])("stores %s as %s", (source, normalised) => {
    expect(compileGlob(source).source).toBe(normalised);
  });

  it.each(["/api/./v1", "/api/../admin"])("rejects dot segments in %s", (source) => {
    expect(() => compileGlob(source)).toThrow('resource must not contain "." or ".." segments (request paths are normalised before matching)');
  });
});

describe("compileGlob literalPrefix", () => {
  it.each([
    ["/api/v1/orders", ["api", "v1", "orders"]],
    ["/api/v1/*", ["api", "v1"]],
    ["/api/**", ["api"]],
    ["/files/*.pdf", ["files"]],
    ["/v?/items", []],
    ["/**", []],
    ["/*/orders", []],
    ["/a/**/b", ["a"]],
    ["/", []],
    ["/api/", ["api"]],
  ] as const)("of %s is %j", (source, prefix) => {
    expect(compileGlob(source).literalPrefix).toEqual(prefix);
  });

  it("keeps the source unchanged", () => {
    expect(compileGlob("/api/v1/*").source).toBe("/api/v1/*");
  });
});

describe("compileGlob validation", () => {
  it("rejects an empty pattern", () => {
    const error = rejection("");
    expect(error.field).toBe("resource");
    expect(error.message).toBe("resource must not be empty (leave it null to match every resource)");
  });

  it("rejects a pattern without a leading slash", () => {
    expect(rejection("api/v1").message).toBe('resource must start with "/" (got "api/v1")');
  });

  it("quotes at most 40 characters of a pattern without a leading slash", () => {
    const source = "x".repeat(100);
    expect(rejection(source).message).toBe(`resource must start with "/" (got "${"x".repeat(40)}")`);
  });

  it(`accepts a pattern of exactly ${MAX_GLOB_LENGTH} characters`, () => {
    const source = "/" + "a".repeat(MAX_GLOB_LENGTH - 1);
    expect(compileGlob(source).matches(source)).toBe(true);
  });

  it(`rejects a pattern longer than ${MAX_GLOB_LENGTH} characters`, () => {
    expect(rejection("/" + "a".repeat(MAX_GLOB_LENGTH)).message).toBe("resource must be at most 512 characters");
  });

  it.each([
    ["a space", "/a b"],
    ["a tab", "/a\tb"],
    ["a newline", "/a\nb"],
    ["a NUL", "/a\u0000b"],
    ["DEL", "/a\u007fb"],
  ])("rejects %s", (_what, source) => {
    expect(rejection(source).message).toBe("resource must not contain spaces or control characters");
  });

  it('rejects "#"', () => {
    expect(rejection("/a#b").message).toBe('resource must not contain "#"');
  });

  it.each(["/a**", "/**a", "/a/b**c", "/a/***"])('rejects "**" inside a segment in %s', (source) => {
    const segment = source.split("/").pop()!;
    expect(rejection(source).message).toBe(
      `resource uses "**" inside a segment ("${segment}"); "**" must be a whole segment, as in /api/**`,
    );
  });

  it(`accepts exactly ${MAX_GLOB_SEGMENTS} segments`, () => {
    expect(compileGlob("/a".repeat(MAX_GLOB_SEGMENTS)).literalPrefix).toHaveLength(MAX_GLOB_SEGMENTS);
  });

  it(`rejects more than ${MAX_GLOB_SEGMENTS} segments`, () => {
    expect(rejection("/a".repeat(MAX_GLOB_SEGMENTS + 1)).message).toBe("resource must have at most 32 segments");
  });

  it("names the field it is given", () => {
    const error = rejection("nope", "input.resource");
    expect(error.field).toBe("input.resource");
    expect(error.message).toBe('input.resource must start with "/" (got "nope")');
  });

  it("is a ValidationError named ValidationError", () => {
    const error = rejection("");
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.name).toBe("ValidationError");
  });
});
