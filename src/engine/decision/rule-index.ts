/**
 * Finds the rules that may apply to a request without looking at the others:
 * rules are filed by tenant, then in a trie by the literal leading segments of
 * their resource glob ("/api/v1/*" under api -> v1), then by method. A lookup
 * walks the request's path down the tenant's trie and the "*" trie and only
 * tests the rules it meets for any method and for the request's method (for
 * HEAD, GET's too: see methodsCounting), so
 * 10,000 rules in other tenants, under other prefixes or for other methods
 * cost nothing. A rule it meets applies when its glob and its conditions on
 * the request's attributes (`when`) both hold. A request that ignores letter
 * case (CheckRequest.ignorePathCase) is matched folded against a second trie,
 * of the folded globs, built when the first such request comes (the same trie
 * when no glob has upper case), then as spelt: a rule applies when either
 * matches, so ignoring case only ever adds rules. (Folding is not one
 * character for one: "İ" folds to two, which a "?" of a folded glob does not
 * stand for; its spelling still matches.)
 */

import { foldPathCase, pathSegments, type CompiledGlob, type MatchMeter } from "../../domain/glob.js";
import type { CheckRequest } from "../../domain/request.js";
import { ALL_TENANTS, methodsCounting, type HttpMethod } from "../../domain/rule.js";
import type { CompiledRule } from "./compiled-rule.js";

class PrefixNode {
  /** Rules for any method. */
  readonly rules: CompiledRule[] = [];
  readonly byMethod = new Map<HttpMethod, CompiledRule[]>();
  readonly children = new Map<string, PrefixNode>();

  add(compiled: CompiledRule): void {
    const method = compiled.rule.method;
    if (method === null) {
      this.rules.push(compiled);
      return;
    }
    const rules = this.byMethod.get(method);
    if (rules) rules.push(compiled);
    else this.byMethod.set(method, [compiled]);
  }

  child(segment: string): PrefixNode {
    let node = this.children.get(segment);
    if (!node) {
      node = new PrefixNode();
      this.children.set(segment, node);
    }
    return node;
  }
}

export class RuleIndex {
  private readonly rules: readonly CompiledRule[];
  private readonly tenants: Map<string, PrefixNode>;
  private folded: Map<string, PrefixNode> | null = null;

  constructor(rules: Iterable<CompiledRule>) {
    this.rules = [...rules].filter((compiled) => compiled.rule.enabled);
    this.tenants = trie(this.rules, (compiled) => compiled.glob);
  }

  /**
   * The enabled rules whose tenant, method and resource match the request.
   * The globs it tests are the request tenant's and tenant "*"'s, each
   * bounded in cost (see glob.ts) and in number (the rule quota); `meter`
   * counts their steps.
   */
  match(request: CheckRequest, meter?: MatchMeter): CompiledRule[] {
    const matched: CompiledRule[] = [];
    const spelt = request.resource === null ? null : pathSegments(request.resource);
    if (!request.ignorePathCase || request.resource === null) {
      collectFrom(this.tenants, { request, segments: spelt, folded: false, again: false, matched, meter });
      return matched;
    }
    // Folded first, so that every spelling of a path gets its rules in one order (RateLimit-Policy's).
    const folded = foldPathCase(request.resource);
    const tries = this.foldedTries();
    collectFrom(tries, { request, segments: pathSegments(folded), folded: true, again: false, matched, meter });
    if (folded !== request.resource || tries !== this.tenants) collectFrom(this.tenants, { request, segments: spelt, folded: false, again: true, matched, meter });
    return matched;
  }

  private foldedTries(): Map<string, PrefixNode> {
    this.folded ??= this.rules.every((compiled) => compiled.foldedGlob === compiled.glob) ? this.tenants : trie(this.rules, (compiled) => compiled.foldedGlob);
    return this.folded;
  }
}

/** The rules filed by tenant, then by the literal prefix of the glob `globOf` gives each. */
function trie(rules: readonly CompiledRule[], globOf: (compiled: CompiledRule) => CompiledGlob | null): Map<string, PrefixNode> {
  const tenants = new Map<string, PrefixNode>();
  for (const compiled of rules) {
    let node = tenants.get(compiled.rule.tenantId);
    if (!node) {
      node = new PrefixNode();
      tenants.set(compiled.rule.tenantId, node);
    }
    for (const segment of globOf(compiled)?.literalPrefix ?? []) node = node.child(segment);
    node.add(compiled);
  }
  return tenants;
}

/** One walk of a trie for a request: its path split into `segments` (null: it names none), as spelt or `folded` (path and globs), adding to `matched` (`again`: the second walk, which skips what the first found). */
interface Walk {
  request: CheckRequest;
  segments: readonly string[] | null;
  folded: boolean;
  again: boolean;
  matched: CompiledRule[];
  meter: MatchMeter | undefined;
}

/** The rules of `tenants` (a trie) that match the walk's request, added to its `matched` unless there already. */
function collectFrom(tenants: ReadonlyMap<string, PrefixNode>, walk: Walk): void {
  const { request, segments } = walk;
  for (const tenant of [request.tenantId, ALL_TENANTS]) {
    let node = tenants.get(tenant);
    let depth = 0;
    while (node) {
      collectMatching(node.rules, walk);
      if (request.method !== null) for (const method of methodsCounting(request.method)) collectMatching(node.byMethod.get(method), walk);
      node = segments !== null && depth < segments.length ? node.children.get(segments[depth++]!) : undefined;
    }
  }
}

function collectMatching(rules: readonly CompiledRule[] | undefined, { request, segments, folded, again, matched, meter }: Walk): void {
  for (const compiled of rules ?? []) {
    const { when } = compiled;
    if (again && matched.includes(compiled)) continue;
    const glob = folded ? compiled.foldedGlob : compiled.glob;
    if (when !== null && !when(request.attributes)) continue;
    if (glob === null || (segments !== null && glob.matchesSegments(segments, meter))) matched.push(compiled);
  }
}
