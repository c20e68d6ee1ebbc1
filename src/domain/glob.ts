/**
 * Resource globs, compiled once when a rule is loaded and matched without
 * regular expressions, so no pattern can make matching backtrack
 * catastrophically.
 *
 *   /api/v1/orders   exactly that path
 *   /api/v1/*        one segment below /api/v1 ("*" never crosses "/")
 *   /api/**          /api and everything below it ("**" is a whole segment)
 *   /files/*.pdf     "*" and "?" also work inside a segment
 *
 * Matching is greedy with one backtrack point per wildcard level, so a match
 * costs at most (pattern segments x path segments) segment comparisons.
 * Globs are normalised like request paths ("/api//v1/" is "/api/v1"), and the
 * paths they are matched against are normalised ones (see normalizePath).
 */

import { ValidationError } from "./errors.js";

export const MAX_GLOB_LENGTH = 512;
export const MAX_GLOB_SEGMENTS = 32;

const GLOBSTAR = Symbol("**");
type SegmentMatcher = string | { readonly pattern: string } | typeof GLOBSTAR;

export interface CompiledGlob {
  readonly source: string;
  /** The leading segments without wildcards, e.g. ["api", "v1"] for "/api/v1/*"; used to index rules. */
  readonly literalPrefix: readonly string[];
  matches(path: string): boolean;
}

export function compileGlob(source: string, field = "resource"): CompiledGlob {
  if (source.length === 0) throw new ValidationError(field, "must not be empty (leave it null to match every resource)");
  if (source.length > MAX_GLOB_LENGTH) throw new ValidationError(field, `must be at most ${MAX_GLOB_LENGTH} characters`);
  if (!source.startsWith("/")) throw new ValidationError(field, `must start with "/" (got ${JSON.stringify(source.slice(0, 40))})`);
  if (/[\u0000-\u0020\u007f]/.test(source)) throw new ValidationError(field, "must not contain spaces or control characters");
  if (source.includes("#")) throw new ValidationError(field, 'must not contain "#"');
  const parts = source.split("/").filter((part) => part !== "");
  if (parts.some((part) => part === "." || part === "..")) {
    throw new ValidationError(field, 'must not contain "." or ".." segments (request paths are normalised before matching)');
  }
  if (parts.length > MAX_GLOB_SEGMENTS) throw new ValidationError(field, `must have at most ${MAX_GLOB_SEGMENTS} segments`);
  const segments: SegmentMatcher[] = parts.map((part) => {
    if (part === "**") return GLOBSTAR;
    if (part.includes("**")) throw new ValidationError(field, `uses "**" inside a segment ("${part}"); "**" must be a whole segment, as in /api/**`);
    return /[*?]/.test(part) ? { pattern: part } : part;
  });
  const literalPrefix: string[] = [];
  for (const segment of segments) {
    if (typeof segment !== "string") break;
    literalPrefix.push(segment);
  }
  return {
    source: `/${parts.join("/")}`,
    literalPrefix,
    matches: (path) => matchSegments(segments, pathSegments(path)),
  };
}

function matchSegments(pattern: readonly SegmentMatcher[], path: readonly string[]): boolean {
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = 0;
  while (s < path.length) {
    const current = pattern[p];
    if (current === GLOBSTAR) {
      starP = p++;
      starS = s;
    } else if (current !== undefined && matchSegment(current, path[s]!)) {
      p++;
      s++;
    } else if (starP >= 0) {
      p = starP + 1;
      s = ++starS;
    } else {
      return false;
    }
  }
  while (pattern[p] === GLOBSTAR) p++;
  return p === pattern.length;
}

function matchSegment(matcher: string | { readonly pattern: string }, text: string): boolean {
  if (typeof matcher === "string") return matcher === text;
  const pattern = matcher.pattern;
  let p = 0;
  let t = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    const c = pattern[p];
    if (c === "*") {
      starP = p++;
      starT = t;
    } else if (c !== undefined && (c === "?" || c === text[t])) {
      p++;
      t++;
    } else if (starP >= 0) {
      p = starP + 1;
      t = ++starT;
    } else {
      return false;
    }
  }
  while (pattern[p] === "*") p++;
  return p === pattern.length;
}

/** The segments of a normalised path: "/" has none, "/api/v1" has ["api", "v1"]. */
export function pathSegments(path: string): string[] {
  return path === "/" ? [] : path.split("/").slice(1);
}
