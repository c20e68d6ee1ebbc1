/**
 * Finds the rules that may apply to a request without looking at the others:
 * rules are filed by tenant, then in a trie by the literal leading segments of
 * their resource glob ("/api/v1/*" under api -> v1), then by method. A lookup
 * walks the request's path down the tenant's trie and the "*" trie and only
 * tests the rules it meets for any method and for the request's method (for
 * HEAD, GET's too: see methodsCounting), so
 * 10,000 rules in other tenants, under other prefixes or for other methods
 * cost nothing. A rule it meets applies when its glob and its conditions on
 * the request's attributes (`when`) both hold.
 */

import { pathSegments, type MatchMeter } from "../../domain/glob.js";
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
  private readonly tenants = new Map<string, PrefixNode>();

  constructor(rules: Iterable<CompiledRule>) {
    for (const compiled of rules) {
      if (!compiled.rule.enabled) continue;
      let node = this.tenants.get(compiled.rule.tenantId);
      if (!node) {
        node = new PrefixNode();
        this.tenants.set(compiled.rule.tenantId, node);
      }
      for (const segment of compiled.glob?.literalPrefix ?? []) node = node.child(segment);
      node.add(compiled);
    }
  }

  /**
   * The enabled rules whose tenant, method and resource match the request.
   * The globs it tests are the request tenant's and tenant "*"'s, each
   * bounded in cost (see glob.ts) and in number (the rule quota); `meter`
   * counts their steps.
   */
  match(request: CheckRequest, meter?: MatchMeter): CompiledRule[] {
    const matched: CompiledRule[] = [];
    const segments = request.resource === null ? null : pathSegments(request.resource);
    for (const tenant of [request.tenantId, ALL_TENANTS]) {
      let node = this.tenants.get(tenant);
      let depth = 0;
      while (node) {
        collectMatching(node.rules, request, segments, matched, meter);
        if (request.method !== null) for (const method of methodsCounting(request.method)) collectMatching(node.byMethod.get(method), request, segments, matched, meter);
        node = segments !== null && depth < segments.length ? node.children.get(segments[depth++]!) : undefined;
      }
    }
    return matched;
  }
}

/** `segments`: the request's path, split once for all the rules; null when the request names no resource. */
function collectMatching(
  rules: readonly CompiledRule[] | undefined,
  request: CheckRequest,
  segments: readonly string[] | null,
  matched: CompiledRule[],
  meter: MatchMeter | undefined,
): void {
  for (const compiled of rules ?? []) {
    const { glob, when } = compiled;
    if (when !== null && !when(request.attributes)) continue;
    if (glob === null || (segments !== null && glob.matchesSegments(segments, meter))) matched.push(compiled);
  }
}
