/**
 * The reference model of which rules apply to a check and which bucket of
 * each it counts against, written from the definitions (docs/rules.md), by
 * brute force: a rule applies when the check carries every attribute its
 * `when` names with one of the values listed, and every dimension and
 * attribute key its buckets are keyed by; its bucket is the tuple of those
 * values. The property tests require the engine's bucket keys to name the
 * same buckets (equal exactly when the tuples are) and its decisions to
 * agree with the algorithms' model on them.
 *
 * Overrides are chosen by scanning them all, globs matched by a regular
 * expression: an exact override on the first target (in the bucket key's
 * order) that has one, else the most specific live glob on the first target
 * that has one (most literal characters, then the smallest identifier).
 */

import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { AttributeCondition } from "../../src/domain/attributes.js";

export interface ModelRule {
  id: string;
  keyedByUser: boolean;
  attributeKeys: string[];
  when: AttributeCondition[];
  params: LimitParams;
  overrides: ModelOverride[];
}

export interface ModelOverride {
  id: string;
  /** "USER" or an attribute key. */
  target: string;
  glob: boolean;
  identifier: string;
  limit: number;
  expiresAtMs: number | null;
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

/** The override that applies to the check's bucket of the rule at nowMs, by brute force; null: the rule's own limit. */
export function modelOverrideOf(rule: ModelRule, check: ModelCheck, nowMs: number): ModelOverride | null {
  const targets = [...(rule.keyedByUser ? ["USER"] : []), ...[...rule.attributeKeys].sort()];
  const valueOf = (target: string) => (target === "USER" ? check.userId : (check.attributes.get(target) ?? null));
  const live = rule.overrides.filter((o) => o.expiresAtMs === null || o.expiresAtMs > nowMs);
  for (const target of targets) {
    const exact = live.find((o) => o.target === target && !o.glob && o.identifier === valueOf(target));
    if (exact !== undefined) return exact;
  }
  for (const target of targets) {
    const value = valueOf(target);
    if (value === null) continue;
    const literals = (o: ModelOverride) => o.identifier.replaceAll("*", "").length;
    const matching = live
      .filter((o) => o.target === target && o.glob && globRegExp(o.identifier).test(value))
      .sort((x, y) => literals(y) - literals(x) || (x.identifier < y.identifier ? -1 : x.identifier > y.identifier ? 1 : 0));
    if (matching.length > 0) return matching[0]!;
  }
  return null;
}

function globRegExp(glob: string): RegExp {
  return new RegExp(`^${glob.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s");
}
