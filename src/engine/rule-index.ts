/**
 * Finds the rules that may apply to a request without looking at the others:
 * rules are filed by tenant, then in a trie by the literal leading segments of
 * their resource glob ("/api/v1/*" under api -> v1). A lookup walks the
 * request's path down the tenant's trie and the "*" trie and only tests the
 * rules it meets, so 10,000 rules in other tenants or under other prefixes
 * cost nothing.
 */

import { pathSegments } from "../domain/glob.js";
import type { CheckRequest } from "../domain/request.js";
import { ALL_TENANTS } from "../domain/rule.js";
import type { CompiledRule } from "./compiled-rule.js";

class PrefixNode {
  readonly rules: CompiledRule[] = [];
  readonly children = new Map<string, PrefixNode>();

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
      node.rules.push(compiled);
    }
  }

  /** The enabled rules whose tenant, method and resource match the request. */
  match(request: CheckRequest): CompiledRule[] {
    const matched: CompiledRule[] = [];
    const segments = request.resource === null ? [] : pathSegments(request.resource);
    for (const tenant of [request.tenantId, ALL_TENANTS]) {
      let node = this.tenants.get(tenant);
      let depth = 0;
      while (node) {
        for (const compiled of node.rules) {
          if (applies(compiled, request)) matched.push(compiled);
        }
        node = depth < segments.length ? node.children.get(segments[depth++]!) : undefined;
      }
    }
    return matched;
  }
}

function applies(compiled: CompiledRule, request: CheckRequest): boolean {
  const { rule, glob } = compiled;
  if (rule.method !== null && rule.method !== request.method) return false;
  if (glob === null) return true;
  return request.resource !== null && glob.matches(request.resource);
}
