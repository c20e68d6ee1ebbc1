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
 * Globs are normalised like request paths ("/api//v1/" is "/api/v1"), and the
 * paths they are matched against are normalised ones (see normalizePath).
 *
 * Matching works alike on two levels: a glob is a sequence of segment
 * patterns with "**" between some of them, and a segment pattern is a
 * sequence of characters ("?" any one) with "*" between some of them. Either
 * is a head, middles and a tail: the head must match at the start, the tail
 * at the end, and each middle, in order, at its leftmost place after the one
 * before (the wildcards between them absorb the rest). Leftmost is always
 * right, so nothing is ever tried twice. A middle of a segment (an infix, "v2"
 * in "*v2*") is found with the shift-and algorithm, which reads each
 * character of the path segment once, whatever the infix.
 *
 * Cost, counted in steps (one per character read, one per segment pattern
 * tried; see MatchMeter). A segment pattern against a path segment of n
 * characters takes at most 1 + n steps. A segment pattern of the glob's head
 * or tail meets one path segment, one between two "**" meets each at most
 * once. So a glob of G segments, F of them between its first and last "**",
 * against a path of T characters in S segments takes at most
 *
 *   1 + G + T + F x (S + T)  steps.
 *
 * validateGlob bounds F and the infixes (longer ones, which only globs stored
 * before it can have, are searched for by their first 32 characters and
 * checked at each place found), and a request's path is bounded
 * (LENGTHS.resource in service-limits.ts), so one rule costs a check at
 * most a constant, and one check's rules cost at most that times their
 * number (see the rule quota).
 * The pattern "/*" + 508 × "a" + "b", 200 of which held a check on a
 * 2,000-character path for 0.9 s when every position was tried, now compares
 * its tail once: 511 steps.
 */

import { ValidationError } from "./errors.js";

export const MAX_GLOB_LENGTH = 512;
export const MAX_GLOB_SEGMENTS = 32;
/** Characters between two "*" of one segment ("-v2-" in "*-v2-*"): the shift-and search holds them in one 32-bit word. */
export const MAX_GLOB_INFIX_LENGTH = 32;
/** Segments between the first and last "**" ("admin" in "/**\/admin/**"): each is tried against every segment of a path. */
export const MAX_GLOB_FLOATING_SEGMENTS = 2;

/** Counts matching work: one step per character read and per segment pattern tried. */
export interface MatchMeter {
  steps: number;
}

/** Where the steps of a match nobody counts go. */
const UNCOUNTED: MatchMeter = { steps: 0 };

interface Sized {
  readonly length: number;
}

/** Exactly `exact`; or `head`, then each of `middles` in order, then `tail`, with anything in between. */
type Starred<Chunk extends Sized, Middle extends Sized> =
  | { readonly exact: Chunk }
  | {
      readonly head: Chunk;
      readonly middles: readonly Middle[];
      readonly tail: Chunk;
      /** The shortest text it matches. */
      readonly minLength: number;
    };

/** Characters, "?" for any one, with "*" between some. */
type SegmentPattern = Starred<Run, Infix>;

/** Characters between wildcards of a segment. */
interface Run {
  readonly text: string;
  readonly length: number;
  /** It holds a "?" (else it is compared as a string, natively). */
  readonly anyCharacter: boolean;
}
/** Segment patterns, one per path segment, with "**" between some. */
type GlobPattern = Starred<readonly SegmentPattern[], readonly SegmentPattern[]>;

/** The text a segment pattern or a glob is matched against, and how its chunks are compared and its middles found. */
interface Level<Chunk, Middle, Text> {
  /** Whether `chunk` matches `text` from `at` on (the text is long enough). */
  fits(chunk: Chunk, text: Text, at: number, meter: MatchMeter): boolean;
  /** Where `middle` first matches in text[from, end), or -1. */
  find(middle: Middle, text: Text, from: number, end: number, meter: MatchMeter): number;
}

/**
 * An infix, for the shift-and search: bit i of a character's mask says that
 * the infix's character i is that character (or "?"). Reading the text, bit i
 * of the state says that the infix's first i + 1 characters end here.
 */
interface Infix {
  readonly length: number;
  /** The masks of character codes below 128. */
  readonly ascii: Int32Array;
  readonly otherMasks: ReadonlyMap<number, number>;
  /** The positions of "?", set in every character's mask. */
  readonly anyCharacter: number;
  /** How many characters the search covers (at most 32), and the bit that says they all matched. */
  readonly searched: number;
  readonly found: number;
  /** The characters past the first 32, checked where those are found (only globs stored before validateGlob's limits have any). */
  readonly rest: string;
}

export interface CompiledGlob {
  readonly source: string;
  /** The leading segments without wildcards, e.g. ["api", "v1"] for "/api/v1/*"; used to index rules. */
  readonly literalPrefix: readonly string[];
  /** The longest run of characters between two "*" of one segment (see MAX_GLOB_INFIX_LENGTH). */
  readonly longestInfix: number;
  /** The segments between the first and last "**" (see MAX_GLOB_FLOATING_SEGMENTS). */
  readonly floatingSegments: number;
  matches(path: string, meter?: MatchMeter): boolean;
  /** matches() for a path already split by pathSegments, so that one request's path is split once for all its rules. */
  matchesSegments(segments: readonly string[], meter?: MatchMeter): boolean;
}

const QUESTION_MARK = "?".charCodeAt(0);
const SEARCH_WIDTH = 32;

/** Compiles a stored glob; validateGlob also bounds the cost of matching it, for new and changed rules. */
export function compileGlob(source: string, field = "resource", maxLength = MAX_GLOB_LENGTH): CompiledGlob {
  if (source.length === 0) throw new ValidationError(field, "must not be empty (leave it null to match every resource)");
  if (source.length > maxLength) throw new ValidationError(field, `must be at most ${maxLength} characters`);
  if (!source.startsWith("/")) throw new ValidationError(field, `must start with "/" (got ${JSON.stringify(source.slice(0, 40))})`);
  if (/[\u0000-\u0020\u007f]/.test(source)) throw new ValidationError(field, "must not contain spaces or control characters");
  if (source.includes("#")) throw new ValidationError(field, 'must not contain "#"');
  const parts = source.split("/").filter((part) => part !== "");
  if (parts.some((part) => part === "." || part === "..")) {
    throw new ValidationError(field, 'must not contain "." or ".." segments (request paths are normalised before matching)');
  }
  if (parts.length > MAX_GLOB_SEGMENTS) throw new ValidationError(field, `must have at most ${MAX_GLOB_SEGMENTS} segments`);
  const segmentParts = parts.filter((part) => part !== "**");
  const nested = segmentParts.find((part) => part.includes("**"));
  if (nested !== undefined) throw new ValidationError(field, `uses "**" inside a segment ("${nested}"); "**" must be a whole segment, as in /api/**`);
  const literalPrefix: string[] = [];
  for (const part of parts) {
    if (/[*?]/.test(part)) break;
    literalPrefix.push(part);
  }
  const pattern = globPattern(parts);
  const matchesSegments = (segments: readonly string[], meter = UNCOUNTED) => matchStarred(pattern, segments, SEGMENTS, meter);
  return {
    source: `/${parts.join("/")}`,
    literalPrefix,
    longestInfix: Math.max(0, ...segmentParts.flatMap((part) => part.split("*").slice(1, -1).map((infix) => infix.length))),
    floatingSegments: "exact" in pattern ? 0 : pattern.middles.reduce((sum, middle) => sum + middle.length, 0),
    matches: (path, meter) => matchesSegments(pathSegments(path), meter),
    matchesSegments,
  };
}

/** compileGlob for a new or changed rule: also refuses globs that could cost a check more than the limits allow (see the cost above). */
export function validateGlob(source: string, field = "resource"): CompiledGlob {
  const glob = compileGlob(source, field);
  if (glob.longestInfix > MAX_GLOB_INFIX_LENGTH) {
    throw new ValidationError(field, `may have at most ${MAX_GLOB_INFIX_LENGTH} characters between two "*" of a segment (got ${glob.longestInfix})`);
  }
  if (glob.floatingSegments > MAX_GLOB_FLOATING_SEGMENTS) {
    throw new ValidationError(
      field,
      `may have at most ${MAX_GLOB_FLOATING_SEGMENTS} segments between its first and last "**" (got ${glob.floatingSegments}); each is tried against every segment of the path`,
    );
  }
  return glob;
}

function globPattern(parts: readonly string[]): GlobPattern {
  const chunks: SegmentPattern[][] = [[]];
  for (const part of parts) {
    if (part === "**") chunks.push([]);
    else chunks.at(-1)!.push(segmentPattern(part));
  }
  // Consecutive "**" leave empty middles, which match anywhere.
  return starred(
    chunks,
    chunks.slice(1, -1).filter((chunk) => chunk.length > 0),
  );
}

function segmentPattern(part: string): SegmentPattern {
  const chunks = part.split("*");
  return starred(
    chunks.map((text) => ({ text, length: text.length, anyCharacter: text.includes("?") })),
    chunks.slice(1, -1).map(infix),
  );
}

/** The pattern of the chunks that stood between wildcards (one chunk: there was no wildcard), with its middles compiled. */
function starred<Chunk extends Sized, Middle extends Sized>(chunks: readonly Chunk[], middles: readonly Middle[]): Starred<Chunk, Middle> {
  if (chunks.length === 1) return { exact: chunks[0]! };
  const head = chunks[0]!;
  const tail = chunks.at(-1)!;
  return { head, middles, tail, minLength: head.length + tail.length + middles.reduce((sum, middle) => sum + middle.length, 0) };
}

function infix(run: string): Infix {
  const searched = Math.min(run.length, SEARCH_WIDTH);
  const ascii = new Int32Array(128);
  const otherMasks = new Map<number, number>();
  let anyCharacter = 0;
  for (let i = 0; i < searched; i++) {
    const c = run.charCodeAt(i);
    if (c === QUESTION_MARK) anyCharacter |= 1 << i;
    else if (c < 128) ascii[c]! |= 1 << i;
    else otherMasks.set(c, (otherMasks.get(c) ?? 0) | (1 << i));
  }
  return { length: run.length, ascii, otherMasks, anyCharacter, searched, found: 1 << (searched - 1), rest: run.slice(searched) };
}

function matchStarred<Chunk extends Sized, Middle extends Sized, Text extends Sized>(
  pattern: Starred<Chunk, Middle>,
  text: Text,
  level: Level<Chunk, Middle, Text>,
  meter: MatchMeter,
): boolean {
  meter.steps++;
  if ("exact" in pattern) return text.length === pattern.exact.length && level.fits(pattern.exact, text, 0, meter);
  const { head, middles, tail } = pattern;
  if (text.length < pattern.minLength || !level.fits(head, text, 0, meter) || !level.fits(tail, text, text.length - tail.length, meter)) return false;
  let from = head.length;
  const end = text.length - tail.length;
  for (const middle of middles) {
    const at = level.find(middle, text, from, end, meter);
    if (at < 0) return false;
    from = at + middle.length;
  }
  return true;
}

/** A segment pattern against the characters of a path segment. */
const CHARACTERS: Level<Run, Infix, string> = {
  fits(run, text, at, meter) {
    if (!run.anyCharacter) {
      meter.steps += run.length;
      return text.startsWith(run.text, at);
    }
    return fitsCharacters(run.text, text, at, meter);
  },
  find(infix, text, from, end, meter) {
    let state = 0;
    for (let t = from; t < end; t++) {
      const c = text.charCodeAt(t);
      state = ((state << 1) | 1) & ((c < 128 ? infix.ascii[c]! : (infix.otherMasks.get(c) ?? 0)) | infix.anyCharacter);
      if ((state & infix.found) === 0) continue;
      const at = t + 1 - infix.searched;
      if (at + infix.length <= end && fitsCharacters(infix.rest, text, t + 1, meter)) {
        meter.steps += t + 1 - from;
        return at;
      }
    }
    meter.steps += end - from;
    return -1;
  },
};

/** A glob against the segments of a path. */
const SEGMENTS: Level<readonly SegmentPattern[], readonly SegmentPattern[], readonly string[]> = {
  fits(chunk, segments, at, meter) {
    for (let i = 0; i < chunk.length; i++) {
      if (!matchStarred(chunk[i]!, segments[at + i]!, CHARACTERS, meter)) return false;
    }
    return true;
  },
  find(middle, segments, from, end, meter) {
    for (let at = from; at + middle.length <= end; at++) if (SEGMENTS.fits(middle, segments, at, meter)) return at;
    return -1;
  },
};

function fitsCharacters(chunk: string, text: string, at: number, meter: MatchMeter): boolean {
  for (let i = 0; i < chunk.length; i++) {
    const c = chunk.charCodeAt(i);
    if (c !== QUESTION_MARK && c !== text.charCodeAt(at + i)) {
      meter.steps += i + 1;
      return false;
    }
  }
  meter.steps += chunk.length;
  return true;
}

/** A resource as rules see it: without its query string or fragment (the client and the middleware key by it too). */
export function withoutQueryOrFragment(resource: string): string {
  const end = resource.search(/[?#]/);
  return end === -1 ? resource : resource.slice(0, end);
}

/**
 * A path or glob as compared for an app whose router ignores letter case
 * (Express's routers, Fastify's with caseSensitive off): lower case as
 * JavaScript's toLowerCase gives it, as Fastify's router folds its routes and
 * paths, then every sigma as "σ". toLowerCase writes a capital sigma as the
 * final "ς" where it ends a word, and a "*" or "?" beside it is not a letter,
 * so a glob and a path it matches could fold differently there; with one
 * sigma for all, folding depends on each character alone. ("İ" folds to
 * "i" and a combining dot, two characters, on both sides alike: a "?" of a
 * glob does not stand for it.)
 */
export function foldPathCase(text: string): string {
  const lower = text.toLowerCase();
  return NON_ASCII.test(lower) ? lower.replaceAll("\u03c2", "\u03c3") : lower;
}

const NON_ASCII = /[^\u0000-\u007f]/;

/**
 * `glob` as compared with a folded path (foldPathCase): itself when folding
 * changes nothing. Its bounds were checked on the glob as written; folding
 * lengthens only "İ", so the folded one may pass MAX_GLOB_LENGTH.
 */
export function foldedGlobOf(glob: CompiledGlob): CompiledGlob {
  const folded = foldPathCase(glob.source);
  return folded === glob.source ? glob : compileGlob(folded, "resource", Number.POSITIVE_INFINITY);
}

/** The segments of a normalised path: "/" has none, "/api/v1" has ["api", "v1"]. */
export function pathSegments(path: string): string[] {
  return path === "/" ? [] : path.split("/").slice(1);
}
