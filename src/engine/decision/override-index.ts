/**
 * The overrides of one rule, filed so that finding a bucket's override costs
 * the same with 10 or 100,000 of them (see domain/override.ts for what an
 * override is and which one wins). For each of the rule's values an
 * override can name (its target):
 *   - exact identifiers in a map;
 *   - globs by their literal prefix or, when that is shorter, their literal
 *     suffix ("*@acme.com" under "@acme.com"), one map per anchor length: a
 *     lookup tries each length in use once, and tests only the globs whose
 *     anchor the value has. Globs without a literal end ("*x*") are tested
 *     one by one: write a prefix or a suffix where there is one;
 *   - CIDR blocks by family and prefix length, one map per length: a lookup
 *     masks the address for each length in use, longest first.
 * An expired override is skipped where it is met, and left out of the next
 * load from the database; nothing needs a timer for an expiry to take effect
 * on time.
 */

import { limitParamsOf, type LimitParams } from "../../domain/algorithms/index.js";
import { ValidationError } from "../../domain/errors.js";
import { foldPathCase } from "../../domain/glob.js";
import { effectiveSpec, ipBits, networkOf, overrideIdentity, type Override, type OverrideTarget } from "../../domain/override.js";
import { validateAcrossFields } from "../../domain/rule-validation.js";
import type { Rule } from "../../domain/rule.js";

interface FiledGlob {
  override: Override;
  parts: string[];
  /** How many literal characters it has: the more, the more specific. */
  literals: number;
}

/** Globs filed by an anchor (prefix or suffix) of one length, and how many of each length there are. */
class AnchoredGlobs {
  private readonly byAnchor = new Map<string, Map<string, FiledGlob>>();
  private readonly lengths = new Map<number, number>();

  constructor(private readonly anchorOf: (value: string, length: number) => string) {}

  add(anchor: string, glob: FiledGlob): void {
    let filed = this.byAnchor.get(anchor);
    if (filed === undefined) this.byAnchor.set(anchor, (filed = new Map()));
    filed.set(glob.override.id, glob);
    this.lengths.set(anchor.length, (this.lengths.get(anchor.length) ?? 0) + 1);
  }

  remove(anchor: string, id: string): void {
    const filed = this.byAnchor.get(anchor);
    if (!filed?.delete(id)) return;
    if (filed.size === 0) this.byAnchor.delete(anchor);
    const left = this.lengths.get(anchor.length)! - 1;
    if (left === 0) this.lengths.delete(anchor.length);
    else this.lengths.set(anchor.length, left);
  }

  *candidates(value: string): Iterable<FiledGlob> {
    for (const length of this.lengths.keys()) {
      if (length > value.length) continue;
      const filed = this.byAnchor.get(this.anchorOf(value, length));
      if (filed !== undefined) yield* filed.values();
    }
  }
}

/** The overrides of one rule on one target. */
class TargetOverrides {
  private readonly exact = new Map<string, Override>();
  private readonly byPrefix = new AnchoredGlobs((value, length) => value.slice(0, length));
  private readonly bySuffix = new AnchoredGlobs((value, length) => value.slice(value.length - length));
  private readonly floating = new Map<string, FiledGlob>();
  /** prefix length -> block key -> override; lengths longest first. */
  private readonly blocks = new Map<number, Map<string, Override>>();
  private blockLengths: number[] = [];

  add(override: Override): void {
    const { identifier } = override;
    if (override.match === "EXACT") this.exact.set(identifier, override);
    else if (override.match === "CIDR") {
      const [address, length] = splitBlock(identifier);
      let filed = this.blocks.get(length);
      if (filed === undefined) {
        this.blocks.set(length, (filed = new Map()));
        this.blockLengths = [...this.blocks.keys()].sort((a, b) => b - a);
      }
      filed.set(networkOf(ipBits(address), length), override);
    } else {
      const parts = identifier.split("*");
      const glob: FiledGlob = { override, parts, literals: parts.reduce((sum, part) => sum + part.length, 0) };
      const anchor = globAnchor(parts);
      if (anchor === null) this.floating.set(override.id, glob);
      else (anchor.end === "prefix" ? this.byPrefix : this.bySuffix).add(anchor.text, glob);
    }
  }

  remove(override: Override): void {
    const { identifier } = override;
    if (override.match === "EXACT") {
      if (this.exact.get(identifier)?.id === override.id) this.exact.delete(identifier);
    } else if (override.match === "CIDR") {
      const [address, length] = splitBlock(identifier);
      const filed = this.blocks.get(length);
      filed?.delete(networkOf(ipBits(address), length));
      if (filed?.size === 0) {
        this.blocks.delete(length);
        this.blockLengths = [...this.blocks.keys()].sort((a, b) => b - a);
      }
    } else {
      const anchor = globAnchor(identifier.split("*"));
      if (anchor === null) this.floating.delete(override.id);
      else (anchor.end === "prefix" ? this.byPrefix : this.bySuffix).remove(anchor.text, override.id);
    }
  }

  findExact(value: string, nowMs: number): Override | null {
    const override = this.exact.get(value);
    return override !== undefined && live(override, nowMs) ? override : null;
  }

  /** The most specific live glob or block matching the value. */
  findPattern(value: string, nowMs: number, isIp: boolean): Override | null {
    if (isIp) {
      if (this.blockLengths.length === 0) return null;
      const bits = ipBits(value);
      for (const length of this.blockLengths) {
        if (length > bits.length) continue;
        const override = this.blocks.get(length)!.get(networkOf(bits, length));
        if (override !== undefined && live(override, nowMs)) return override;
      }
      return null;
    }
    let best: FiledGlob | null = null;
    this.forEachMatch(value, nowMs, (glob) => {
      if (best === null || glob.literals > best.literals || (glob.literals === best.literals && glob.override.identifier < best.override.identifier)) best = glob;
    });
    return (best as FiledGlob | null)?.override ?? null;
  }

  /** Every live glob matching the value. */
  matchingGlobs(value: string, nowMs: number): FiledGlob[] {
    const found: FiledGlob[] = [];
    this.forEachMatch(value, nowMs, (glob) => found.push(glob));
    return found;
  }

  private forEachMatch(value: string, nowMs: number, visit: (glob: FiledGlob) => void): void {
    const consider = (glob: FiledGlob) => {
      if (live(glob.override, nowMs) && globMatches(glob.parts, value)) visit(glob);
    };
    for (const glob of this.byPrefix.candidates(value)) consider(glob);
    for (const glob of this.bySuffix.candidates(value)) consider(glob);
    for (const glob of this.floating.values()) consider(glob);
  }
}

/** The params an override gives its buckets under the rule as it now is; null when that rule cannot take them. */
interface ParamsOfVersion {
  ruleVersion: number;
  params: LimitParams | null;
}

export class RuleOverrides {
  private readonly byId = new Map<string, Override>();
  private readonly byIdentity = new Map<string, string>();
  private readonly targets = new Map<string, TargetOverrides>();
  /**
   * The ENDPOINT overrides as checks that ignore letter case (whose endpoint
   * is folded) compare them: globs by their folded identifier; exact ones by
   * theirs in `spellings`, where two spellings of one endpoint ("GET /a",
   * "GET /A") meet, each kept (see find).
   */
  private readonly foldedEndpoints = new TargetOverrides();
  /** Each folded identifier's spellings, kept latest written first: a check walks them, never sorts them. */
  private readonly spellings = new Map<string, Override[]>();
  private readonly params = new Map<string, ParamsOfVersion>();

  get size(): number {
    return this.byId.size;
  }

  get(id: string): Override | undefined {
    return this.byId.get(id);
  }

  values(): IterableIterator<Override> {
    return this.byId.values();
  }

  /** The id of another override that `override` would replace (same identity, another id); null when none. */
  replacing(override: Override): string | null {
    const id = this.byIdentity.get(overrideIdentity(override));
    return id !== undefined && id !== override.id ? id : null;
  }

  /** Adds the override, replacing the one of the same id or identity. */
  set(override: Override): void {
    const sameIdentity = this.byIdentity.get(overrideIdentity(override));
    if (sameIdentity !== undefined) this.delete(sameIdentity);
    this.delete(override.id);
    this.byId.set(override.id, override);
    this.byIdentity.set(overrideIdentity(override), override.id);
    const name = targetName(override);
    let target = this.targets.get(name);
    if (target === undefined) this.targets.set(name, (target = new TargetOverrides()));
    target.add(override);
    if (override.dimension === "ENDPOINT") {
      const twin = folded(override);
      if (override.match !== "EXACT") this.foldedEndpoints.add(twin);
      else {
        const spelt = [...(this.spellings.get(twin.identifier) ?? []), override].sort(latestWrittenFirst);
        this.spellings.set(twin.identifier, spelt);
      }
    }
  }

  delete(id: string): void {
    const override = this.byId.get(id);
    if (override === undefined) return;
    this.byId.delete(id);
    this.byIdentity.delete(overrideIdentity(override));
    this.params.delete(id);
    this.targets.get(targetName(override))?.remove(override);
    if (override.dimension === "ENDPOINT") {
      const twin = folded(override);
      if (override.match !== "EXACT") this.foldedEndpoints.remove(twin);
      else {
        const spelt = (this.spellings.get(twin.identifier) ?? []).filter((other) => other !== override);
        if (spelt.length === 0) this.spellings.delete(twin.identifier);
        else this.spellings.set(twin.identifier, spelt);
      }
    }
  }

  /**
   * The override that applies to a bucket, with the params it gives: the
   * targets in the bucket key's order, exact overrides first, then globs and
   * blocks. `valueOf` gives the request's value for a target. `ignoringCase`:
   * the request ignores letter case, so its endpoint (method and folded
   * path) is compared with ENDPOINT overrides folded too, method and all.
   */
  find(
    rule: Rule,
    targets: readonly OverrideTarget[],
    valueOf: (target: OverrideTarget) => string | null,
    nowMs: number,
    ignoringCase = false,
  ): { override: Override; params: LimitParams } | null {
    if (this.byId.size === 0) return null;
    const values = targets.map((target) => {
      const value = valueOf(target);
      return ignoringCase && value !== null && target.dimension === "ENDPOINT" ? foldPathCase(value) : value;
    });
    for (const pass of ["exact", "pattern"] as const) {
      for (const [i, target] of targets.entries()) {
        const value = values[i];
        if (value === null || value === undefined) continue;
        if (ignoringCase && target.dimension === "ENDPOINT") {
          const found = pass === "exact" ? this.spelling(rule, value, nowMs) : this.foldedPattern(rule, value, nowMs);
          if (found !== null) return found;
          continue;
        }
        const filed = this.targets.get(targetName(target));
        if (filed === undefined) continue;
        const override = pass === "exact" ? filed.findExact(value, nowMs) : filed.findPattern(value, nowMs, target.dimension === "IP");
        const params = override === null ? null : this.paramsOf(rule, override);
        if (override !== null && params !== null) return { override, params };
      }
    }
    return null;
  }

  /**
   * The exact ENDPOINT override for a folded endpoint: of its spellings, the
   * latest written (highest version, then id) that is live and that the rule
   * can take, so that every instance, whatever order it loaded them in, picks
   * the same, and one that cannot apply hides none.
   */
  private spelling(rule: Rule, folded: string, nowMs: number): { override: Override; params: LimitParams } | null {
    const spelt = this.spellings.get(folded);
    if (spelt === undefined) return null;
    for (const override of spelt) {
      const params = live(override, nowMs) ? this.paramsOf(rule, override) : null;
      if (params !== null) return { override, params };
    }
    return null;
  }

  /**
   * The ENDPOINT glob for a folded endpoint, as written: the most specific of
   * the folded globs that match; among equally specific ones (spellings of
   * one glob, "GET /api/Reports/*" and "GET /api/reports/*"), the latest
   * written, as for exact ones; one the rule cannot take hides none.
   */
  private foldedPattern(rule: Rule, folded: string, nowMs: number): { override: Override; params: LimitParams } | null {
    const ranked = this.foldedEndpoints
      .matchingGlobs(folded, nowMs)
      .map((twin) => ({ literals: twin.literals, override: this.byId.get(twin.override.id)! }))
      .sort((a, b) => b.literals - a.literals || latestWrittenFirst(a.override, b.override));
    for (const { override } of ranked) {
      const params = this.paramsOf(rule, override);
      if (params !== null) return { override, params };
    }
    return null;
  }

  private paramsOf(rule: Rule, override: Override): LimitParams | null {
    const known = this.params.get(override.id);
    if (known !== undefined && known.ruleVersion === rule.version) return known.params;
    const params = paramsUnder(rule, override);
    this.params.set(override.id, { ruleVersion: rule.version, params });
    return params;
  }
}

/**
 * An override was valid for the rule when it was set; a later change of the
 * rule (another algorithm, a longer window) can make it one the rule cannot
 * take (a limit over SLIDING_WINDOW_LOG's bound, say). Such an override does
 * not apply until the rule or the override changes again.
 */
function paramsUnder(rule: Rule, override: Override): LimitParams | null {
  const spec = effectiveSpec(rule, override);
  try {
    validateAcrossFields(spec, (name) => name);
  } catch (error) {
    if (error instanceof ValidationError) return null;
    throw error;
  }
  return limitParamsOf(spec);
}

function live(override: Override, nowMs: number): boolean {
  return override.expiresAt === null || override.expiresAt.getTime() > nowMs;
}

/** Spellings of one override in the order they apply: the latest written (highest version), then by id, so that every instance picks alike. */
function latestWrittenFirst(a: Override, b: Override): number {
  return b.version - a.version || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

/** An ENDPOINT override as compared with a folded endpoint: its identifier folded (see foldPathCase). */
function folded(override: Override): Override {
  return { ...override, identifier: foldPathCase(override.identifier) };
}

function targetName(target: Pick<Override, "dimension" | "attributeKey">): string {
  return target.dimension ?? `attr.${target.attributeKey}`;
}

function splitBlock(identifier: string): [string, number] {
  const slash = identifier.lastIndexOf("/");
  return [identifier.slice(0, slash), Number(identifier.slice(slash + 1))];
}

function globAnchor(parts: readonly string[]): { end: "prefix" | "suffix"; text: string } | null {
  const prefix = parts[0]!;
  const suffix = parts[parts.length - 1]!;
  if (prefix.length === 0 && suffix.length === 0) return null;
  return prefix.length >= suffix.length ? { end: "prefix", text: prefix } : { end: "suffix", text: suffix };
}

/**
 * A glob of literal parts between "*"s against a value: the first part
 * begins it, the last ends it, and the others come in order between, each
 * taken at its leftmost place (which never loses a match when "*" is the
 * only wildcard). Linear in the value's length per part.
 */
export function globMatches(parts: readonly string[], value: string): boolean {
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (parts.length === 1) return value === first;
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
  let at = first.length;
  const end = value.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i]!, at);
    if (found === -1 || found + parts[i]!.length > end) return false;
    at = found + parts[i]!.length;
  }
  return true;
}
