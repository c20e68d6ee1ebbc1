import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/domain/errors.js";
import {
  compileGlob,
  foldedGlobOf,
  foldPathCase,
  MAX_GLOB_FLOATING_SEGMENTS,
  MAX_GLOB_INFIX_LENGTH,
  MAX_GLOB_LENGTH,
  MAX_GLOB_SEGMENTS,
  pathSegments,
  validateGlob,
  type MatchMeter,
} from "../../src/domain/glob.js";
import { LENGTHS } from "../../src/domain/service-limits.js";
import { costlyPaths } from "../harness/hostile-input.js";
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

  // Infixes around the 32 characters the shift-and search holds, "?" among them, and characters past ASCII.
  const infix = fc.string({ unit: fc.constantFrom("a", "b", "?", "é"), minLength: 1, maxLength: 40 });
  const longSegment = fc.array(infix, { minLength: 1, maxLength: 3 }).map((infixes) => `*${infixes.join("*")}*`);
  const longPathSegment = fc.string({ unit: fc.constantFrom("a", "b", "é"), minLength: 1, maxLength: 120 });

  it("agrees with the reference on long infixes, up to and past 32 characters", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(longSegment, patternSegment), { minLength: 1, maxLength: 3 }).map((parts) => "/" + parts.join("/")),
        fc.array(longPathSegment, { minLength: 1, maxLength: 3 }).map((parts) => "/" + parts.join("/")),
        (source, target) => {
          expect(compileGlob(source).matches(target)).toBe(referenceRegExp(source).test(target));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("agrees with the reference where an infix does occur, past 32 characters and with ?", () => {
    fc.assert(
      fc.property(infix, longPathSegment, longPathSegment, (run, before, after) => {
        const occurring = run.replace(/\?/g, "b");
        for (const target of [`/${before}${occurring}${after}`, `/${before}${occurring.slice(1)}${after}`]) {
          expect(compileGlob(`/*${run}*`).matches(target)).toBe(referenceRegExp(`/*${run}*`).test(target));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

/**
 * The cost of a match, counted in steps (characters read, segment patterns
 * tried): for a glob that validateGlob accepts, at most 1 + G + T + F x (S + T)
 * for G glob segments, F of them between its first and last "**", against a
 * path of T characters in S segments (see glob.ts).
 */
describe("the cost of matching", () => {
  function stepsOf(source: string, path: string): number {
    const meter: MatchMeter = { steps: 0 };
    compileGlob(source).matches(path, meter);
    return meter.steps;
  }

  function bound(source: string, path: string): number {
    const glob = validateGlob(source);
    const segments = glob.source.split("/").filter((part) => part !== "").length;
    return 1 + segments + path.length + glob.floatingSegments * (pathSegments(path).length + path.length);
  }

  const [longPath, manySegments, longSegments] = costlyPaths(LENGTHS.resource) as [string, string, string];

  it.each([
    ["a tail of 509 characters that fails at its last one", "/*" + "a".repeat(508) + "b", longPath, 511],
    ["an infix of 32 characters that never occurs", "/*" + "a".repeat(31) + "b*", longPath, 2 + longPath.length - 1],
    ["infixes with ? that occur late", "/*?a?a?a?b*?b*", "/" + "a".repeat(2000) + "b" + "a".repeat(40) + "b", null],
    ["two floating segments failing at the last", "/**/a/b/**", manySegments, null],
    ["two floating segments of 15 characters", "/**/" + "a".repeat(15) + "/" + "a".repeat(14) + "b/**", longSegments, null],
    ["floating wildcard segments", "/**/*a*/*b*/**", longSegments, null],
    ["consecutive ** and a tail", "/**/**/**/**/x", manySegments, null],
  ] as const)("is within the bound for %s", (_what, source, path, exactly) => {
    const steps = stepsOf(source, path);
    expect(steps).toBeGreaterThan(0);
    expect(steps).toBeLessThanOrEqual(bound(source, path));
    if (exactly !== null) expect(steps).toBe(exactly);
  });

  it("is within the bound for random globs that validateGlob accepts, against random paths", () => {
    const segment = fc.oneof(
      fc.constant("**"),
      fc.string({ unit: fc.constantFrom("a", "b", "*", "?"), minLength: 1, maxLength: 12 }).filter((s) => !s.includes("**")),
    );
    const glob = fc
      .array(segment, { minLength: 1, maxLength: 10 })
      .map((parts) => "/" + parts.join("/"))
      .filter((source) => {
        try {
          validateGlob(source);
          return true;
        } catch {
          return false;
        }
      });
    const path = fc
      .array(fc.string({ unit: fc.constantFrom("a", "b"), minLength: 1, maxLength: 40 }), { minLength: 0, maxLength: 30 })
      .map((parts) => "/" + parts.join("/"));
    fc.assert(
      fc.property(glob, path, (source, target) => {
        expect(stepsOf(source, target)).toBeLessThanOrEqual(bound(source, target));
      }),
      { numRuns: 3000 },
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

describe("validateGlob, for new and changed rules", () => {
  it(`accepts ${MAX_GLOB_INFIX_LENGTH} characters between two "*" of a segment, and refuses more`, () => {
    const longest = "/*" + "a".repeat(MAX_GLOB_INFIX_LENGTH) + "*";
    expect(validateGlob(longest).source).toBe(longest);
    const error = validationErrorOf(() => validateGlob("/x/*" + "a".repeat(MAX_GLOB_INFIX_LENGTH + 1) + "*.pdf", "input.resource"));
    expect(error.field).toBe("input.resource");
    expect(error.message).toBe(`input.resource may have at most 32 characters between two "*" of a segment (got 33)`);
  });

  it("does not count a segment's head and tail, which are only compared once", () => {
    expect(validateGlob("/" + "a".repeat(200) + "*" + "b".repeat(200)).longestInfix).toBe(0);
  });

  it(`accepts ${MAX_GLOB_FLOATING_SEGMENTS} segments between the first and last "**", and refuses more`, () => {
    expect(validateGlob("/**/a/**/b/**").floatingSegments).toBe(2);
    expect(validateGlob("/a/b/**/c/**/**/d/e").floatingSegments).toBe(1);
    expect(validationErrorOf(() => validateGlob("/x/**/a/b/**/c/**/y")).message).toBe(
      'resource may have at most 2 segments between its first and last "**" (got 3); each is tried against every segment of the path',
    );
  });

  it("leaves compileGlob accepting what it refuses, so that rules stored before its limits still load", () => {
    expect(compileGlob("/**/a/b/**/c/d/e/**").matches("/x/a/b/y/c/d/e")).toBe(true);
    expect(compileGlob("/*" + "ab".repeat(20) + "*").matches("/x" + "ab".repeat(20) + "y")).toBe(true);
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

describe("foldPathCase and foldedGlobOf", () => {
  it("keeps every match: a glob that matches a path, folded, matches the path folded", () => {
    // "İ" folds to two characters: a "?" never stands for it here (see foldPathCase).
    const letter = fc.constantFrom("A", "a", "B", "x", "Σ", "σ", "ς", "İ", "i", "\u0307", "K", "\u212a", "%", "2", "F");
    const path = fc.array(fc.array(letter, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 3 });
    const globbed = path.chain((segments) =>
      fc.tuple(
        fc.constant(segments),
        fc.array(fc.array(fc.constantFrom("keep", "keep", "any", "run"), { minLength: 6, maxLength: 6 }), { minLength: 3, maxLength: 3 }),
      ),
    );
    fc.assert(
      fc.property(globbed, ([segments, choices]) => {
        const text = "/" + segments.map((s) => s.join("")).join("/");
        const glob =
          "/" +
          segments
            .map((s, i) =>
              s
                .map((c, j) => (choices[i]![j] === "any" && c !== "İ" ? "?" : choices[i]![j] === "run" ? "*" : c))
                .join("")
                .replace(/\*+/g, "*"),
            )
            .join("/");
        const compiled = compileGlob(glob);
        if (!compiled.matches(text)) return true;
        return foldedGlobOf(compiled).matches(foldPathCase(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it("folds a glob longer than the limit by its İs, and leaves one without upper case as it is", () => {
    const long = compileGlob("/" + "İ".repeat(MAX_GLOB_LENGTH - 1));
    expect(foldedGlobOf(long).matches("/" + "i\u0307".repeat(MAX_GLOB_LENGTH - 1))).toBe(true);
    const lower = compileGlob("/api/*");
    expect(foldedGlobOf(lower)).toBe(lower);
  });
});
