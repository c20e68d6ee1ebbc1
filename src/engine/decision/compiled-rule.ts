/**
 * A rule prepared for the hot path: everything a check needs that depends
 * only on the rule (glob, key builder, algorithm parameters, header text) is
 * computed once here, when the rule is loaded or changed, never per request.
 */

import { limitParamsOf, type LimitParams } from "../../domain/algorithms/index.js";
import { compileConditions, type AttributeTest } from "../../domain/attributes.js";
import { compileBucketKey, type BucketKeyOf } from "../../domain/bucket-key.js";
import { compileGlob, foldedGlobOf, type CompiledGlob } from "../../domain/glob.js";
import { keyedTargets, type OverrideTarget } from "../../domain/override.js";
import { usesBurst, windowSecondsOf, type Rule } from "../../domain/rule.js";

export interface CompiledRule {
  readonly rule: Rule;
  readonly glob: CompiledGlob | null;
  /** The glob as compared with the path of a request that ignores letter case (see CheckRequest.ignorePathCase): `glob` itself when it has no upper case. */
  readonly foldedGlob: CompiledGlob | null;
  /** The rule's `when`; null when it has none and applies whatever the attributes. */
  readonly when: AttributeTest | null;
  readonly keyOf: BucketKeyOf;
  /** What an override of the rule can name, in the bucket key's order. */
  readonly targets: readonly OverrideTarget[];
  readonly params: LimitParams;
  readonly windowSeconds: number;
  /** The rule's name as a structured-field string, for RateLimit-Policy and RateLimit. */
  readonly policyName: string;
  /** The rule's item of the RateLimit-Policy header without its partition key, e.g. "per-user";q=5;w=60 or "tb";q=10;w=1;fg-burst=25 (see headers.ts). */
  readonly policyItem: string;
}

export function compileRule(rule: Rule): CompiledRule {
  const windowSeconds = windowSecondsOf(rule.window, rule.windowUnit);
  const policyName = structuredFieldString(rule.name);
  const params = limitParamsOf(rule);
  const glob = rule.resource === null ? null : compileGlob(rule.resource);
  return {
    rule,
    glob,
    foldedGlob: glob === null ? null : foldedGlobOf(glob),
    when: compileConditions(rule.when),
    keyOf: compileBucketKey(rule),
    targets: keyedTargets(rule),
    params,
    windowSeconds,
    policyName,
    policyItem: policyItemOf(policyName, params),
  };
}

/** A bucket's item of the RateLimit-Policy header: its rule's, or its override's when one applies. */
export function policyItemOf(policyName: string, params: LimitParams): string {
  return `${policyName};q=${params.limit};w=${params.windowMs / 1000}${usesBurst(params.algorithm) ? `;fg-burst=${params.capacity}` : ""}`;
}

/**
 * An RFC 8941 sf-string: printable ASCII only, with " and \ escaped. Other
 * characters of a rule's name become "_", since a header cannot carry them.
 */
function structuredFieldString(text: string): string {
  const printable = Array.from(text, (c) => (c >= " " && c <= "~" ? c : "_")).join("");
  return `"${printable.replace(/(["\\])/g, "\\$1")}"`;
}
