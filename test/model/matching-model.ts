/**
 * The reference model of which rules apply to a check and which bucket of
 * each it counts against, written from the definitions (docs/rules.md), by
 * brute force: a rule applies when the check carries every attribute its
 * `when` names with one of the values listed, and every dimension and
 * attribute key its buckets are keyed by; its bucket is the tuple of those
 * values. The property tests require the engine's bucket keys to name the
 * same buckets (equal exactly when the tuples are) and its decisions to
 * agree with the algorithms' model on them.
 */

import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { AttributeCondition } from "../../src/domain/attributes.js";

export interface ModelRule {
  id: string;
  keyedByUser: boolean;
  attributeKeys: string[];
  when: AttributeCondition[];
  params: LimitParams;
}

export interface ModelCheck {
  userId: string | null;
  attributes: ReadonlyMap<string, string>;
}

/** The bucket the check counts against under the rule, as a tuple of values; null when the rule does not apply. */
export function modelBucketOf(rule: ModelRule, check: ModelCheck): string | null {
  for (const { key, values } of rule.when) {
    const value = check.attributes.get(key);
    if (value === undefined || !values.includes(value)) return null;
  }
  const tuple: string[] = [];
  if (rule.keyedByUser) {
    if (check.userId === null) return null;
    tuple.push(check.userId);
  }
  for (const key of rule.attributeKeys) {
    const value = check.attributes.get(key);
    if (value === undefined) return null;
    tuple.push(value);
  }
  return JSON.stringify([rule.id, ...tuple]);
}
