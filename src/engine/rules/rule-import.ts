/**
 * What importing a rules file would do, decided before anything is written:
 * every entry is validated with createRule's own checks (each problem with its
 * line and field, all of them, not just the first), rules are identified by
 * (tenantId, name), and each valid entry becomes a creation, an update, or
 * nothing when the stored rule already equals it. An entry is the whole rule:
 * a field it leaves out takes its default, as in createRule. Rules the file
 * does not name are left alone. An entry with `overrides` makes them the
 * rule's overrides, each checked with setOverride's own checks against the
 * rule as the entry makes it (those it does not list are deleted); an entry
 * without leaves the rule's overrides alone. Each entry of `lists` is
 * checked with addListEntry's own checks and added unless its list already
 * holds it (identified by tenant, list, kind and canonical value); entries
 * the file does not name are left alone, as rules are.
 */

import { listEntryIdentity, validateListEntry, type ListEntry, type ListEntrySpec } from "../../domain/access-list.js";
import { ValidationError } from "../../domain/errors.js";
import { overrideIdentity, validateOverride, type Override, type OverrideSpec } from "../../domain/override.js";
import type { RuleWrite } from "../../domain/ports.js";
import type { Rule } from "../../domain/rule.js";
import { checkNewRule, sameSpec, specOf } from "../../domain/rule-validation.js";
import { entryPrefix, OVERRIDE_FILE_FIELDS, readRulesFile, type Position, type RulesFile } from "./rules-file.js";

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
  /** The overrides to set and to delete; null when the entry says nothing of them. */
  overrides: { set: OverrideSpec[]; deleted: Override[] } | null;
}

export interface ImportPlan {
  /** How many entries the file's `rules` holds, valid or not. */
  entries: number;
  rules: PlannedRule[];
  /** The file's access list entries: those to add, and how many are already listed. */
  lists: { add: ListEntrySpec[]; unchanged: ListEntrySpec[] };
  problems: ImportProblem[];
}

export function planImport(
  text: string,
  stored: readonly Rule[],
  newId: () => string,
  storedOverrides: ReadonlyMap<string, readonly Override[]> = new Map(),
  now: Date = new Date(),
  storedEntries: readonly ListEntry[] = [],
): ImportPlan {
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
    const ruleId = current?.id ?? newId();
    const overrides = planOverrides(file, entry.index, entry.overrides, { ...spec, id: ruleId, version: current?.version ?? 1, createdAt: now, updatedAt: now }, storedOverrides.get(ruleId) ?? [], now);
    if (overrides !== null && "problems" in overrides) {
      problems.push(...overrides.problems);
      continue;
    }
    const overridesChange = overrides !== null && (overrides.set.length > 0 || overrides.deleted.length > 0);
    const planned = { tenantId: spec.tenantId, name: spec.name, line: entry.position.line, current, overrides };
    if (current === null) rules.push({ ...planned, outcome: "created", write: { kind: "create", id: ruleId, spec } });
    else if (sameSpec(spec, specOf(current))) rules.push({ ...planned, outcome: overridesChange ? "updated" : "unchanged", write: null });
    else rules.push({ ...planned, outcome: "updated", write: { kind: "update", id: current.id, spec, version: current.version } });
  }
  return { entries: file.size, rules, lists: planLists(file, storedEntries, now, problems), problems };
}

/** The file's `lists` against the stored entries; each problem is added to `problems`. */
function planLists(file: RulesFile, stored: readonly ListEntry[], now: Date, problems: ImportProblem[]): ImportPlan["lists"] {
  const listed = new Set(stored.map(listEntryIdentity));
  const seen = new Map<string, { index: number; line: number }>();
  const plan: ImportPlan["lists"] = { add: [], unchanged: [] };
  for (const { index, position, input } of file.lists) {
    let spec: ListEntrySpec;
    try {
      spec = validateListEntry(input, now, `lists[${index}]`);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      problems.push({ ...lineAndColumn(file.positionOf(error.field)), field: error.field, message: error.message });
      continue;
    }
    const id = listEntryIdentity(spec);
    const earlier = seen.get(id);
    if (earlier !== undefined) {
      const field = `lists[${index}].value`;
      problems.push({ ...lineAndColumn(file.positionOf(field)), field, message: `${field} repeats the entry of lists[${earlier.index}] (line ${earlier.line}): an entry is identified by its tenant, list, kind and value` });
      continue;
    }
    seen.set(id, { index, line: position.line });
    (listed.has(id) ? plan.unchanged : plan.add).push(spec);
  }
  return plan;
}

/** The entry's overrides against the rule's stored ones: what to set (new or changed) and what to delete; null when the entry has none. */
function planOverrides(
  file: RulesFile,
  index: number,
  written: unknown,
  rule: Rule,
  stored: readonly Override[],
  now: Date,
): { set: OverrideSpec[]; deleted: Override[] } | { problems: ImportProblem[] } | null {
  if (written === undefined) return null;
  const field = `${entryPrefix(index)}.overrides`;
  const problem = (at: string, message: string): ImportProblem => ({ ...lineAndColumn(file.positionOf(at)), field: at, message });
  if (written !== null && !Array.isArray(written)) return { problems: [problem(field, `${field} must be a list of overrides (use [] for none)`)] };
  const problems: ImportProblem[] = [];
  const specs: OverrideSpec[] = [];
  for (const [i, item] of (written ?? []).entries()) {
    const prefix = `${field}[${i}]`;
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      problems.push(problem(prefix, `${prefix} must be a mapping of override fields`));
      continue;
    }
    const unknown = Object.keys(item).find((key) => !(OVERRIDE_FILE_FIELDS as readonly string[]).includes(key));
    if (unknown !== undefined) {
      problems.push(problem(`${prefix}.${unknown}`, `${prefix}.${unknown} is not an override field; the fields are ${OVERRIDE_FILE_FIELDS.join(", ")}`));
      continue;
    }
    try {
      specs.push(validateOverride({ ...(item as Record<string, unknown>), ruleId: rule.id }, rule, now, prefix));
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      problems.push(problem(error.field, error.message));
    }
  }
  const identities = new Map(specs.map((spec) => [overrideIdentity(spec), spec]));
  if (identities.size < specs.length) problems.push(problem(field, `${field} lists one override (target, match and identifier) twice`));
  if (problems.length > 0) return { problems };
  const byIdentity = new Map(stored.map((override) => [overrideIdentity(override), override]));
  return {
    set: specs.filter((spec) => {
      const known = byIdentity.get(overrideIdentity(spec));
      return known === undefined || !sameOverride(spec, known);
    }),
    deleted: stored.filter((override) => !identities.has(overrideIdentity(override))),
  };
}

function sameOverride(a: OverrideSpec, b: OverrideSpec): boolean {
  return (
    a.limit === b.limit &&
    a.burst === b.burst &&
    a.window === b.window &&
    a.windowUnit === b.windowUnit &&
    a.note === b.note &&
    (a.expiresAt?.getTime() ?? null) === (b.expiresAt?.getTime() ?? null)
  );
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
