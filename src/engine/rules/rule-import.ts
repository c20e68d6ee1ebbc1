/**
 * What importing a rules file would do, decided before anything is written:
 * every entry is validated with createRule's own checks (each problem with its
 * line and field, all of them, not just the first), rules are identified by
 * (tenantId, name), and each valid entry becomes a creation, an update, or
 * nothing when the stored rule already equals it. An entry is the whole rule:
 * a field it leaves out takes its default, as in createRule. Rules the file
 * does not name are left alone.
 */

import type { RuleWrite } from "../../domain/ports.js";
import type { Rule } from "../../domain/rule.js";
import { checkNewRule, sameSpec, specOf } from "../../domain/rule-validation.js";
import { entryPrefix, readRulesFile, type Position } from "./rules-file.js";

export type ImportOutcome = "created" | "updated" | "unchanged";

export interface ImportProblem {
  line: number | null;
  column: number | null;
  /** The field at fault as the file names it ("rules[2].limit"); null for a problem of the YAML itself. */
  field: string | null;
  message: string;
}

export interface PlannedRule {
  outcome: ImportOutcome;
  tenantId: string;
  name: string;
  line: number;
  /** The stored rule it matches; null for one to be created. */
  current: Rule | null;
  /** What to write; null when unchanged. */
  write: RuleWrite | null;
}

export interface ImportPlan {
  /** How many entries the file's `rules` holds, valid or not. */
  entries: number;
  rules: PlannedRule[];
  problems: ImportProblem[];
}

export function planImport(text: string, stored: readonly Rule[], newId: () => string): ImportPlan {
  const file = readRulesFile(text);
  const problems: ImportProblem[] = file.problems.map(({ position, field, message }) => ({ ...lineAndColumn(position), field, message }));
  const byIdentity = new Map(stored.map((rule) => [identity(rule.tenantId, rule.name), rule]));
  const seen = new Map<string, { index: number; line: number }>();
  const rules: PlannedRule[] = [];
  for (const entry of file.entries) {
    const checked = checkNewRule(entry.input, entryPrefix(entry.index));
    if (!checked.ok) {
      for (const error of checked.errors) problems.push({ ...lineAndColumn(file.positionOf(error.field)), field: error.field, message: error.message });
      continue;
    }
    const spec = checked.value;
    const id = identity(spec.tenantId, spec.name);
    const earlier = seen.get(id);
    if (earlier !== undefined) {
      const field = `${entryPrefix(entry.index)}.name`;
      problems.push({
        ...lineAndColumn(file.positionOf(field)),
        field,
        message: `${field} repeats the rule ${JSON.stringify(spec.name)} of tenant ${JSON.stringify(spec.tenantId)} of ${entryPrefix(earlier.index)} (line ${earlier.line}): a rule is identified by its tenant and name`,
      });
      continue;
    }
    seen.set(id, { index: entry.index, line: entry.position.line });
    const current = byIdentity.get(id) ?? null;
    const planned = { tenantId: spec.tenantId, name: spec.name, line: entry.position.line, current };
    if (current === null) rules.push({ ...planned, outcome: "created", write: { kind: "create", id: newId(), spec } });
    else if (sameSpec(spec, specOf(current))) rules.push({ ...planned, outcome: "unchanged", write: null });
    else rules.push({ ...planned, outcome: "updated", write: { kind: "update", id: current.id, spec, version: current.version } });
  }
  return { entries: file.size, rules, problems };
}

function lineAndColumn(position: Position | null): { line: number | null; column: number | null } {
  return { line: position?.line ?? null, column: position?.column ?? null };
}

/** Tenant ids and names hold no control characters, so the two cannot run into each other. */
function identity(tenantId: string, name: string): string {
  return `${tenantId}\n${name}`;
}

/** A problem as a compiler would print it: "rules.yaml:12:5: rules[2].limit must be at least 1 (got 0)". */
export function describeProblem(file: string, problem: ImportProblem): string {
  const where = problem.line === null ? file : `${file}:${problem.line}:${problem.column ?? 1}`;
  return `${where}: ${problem.message}`;
}
