/**
 * The rules file: YAML holding one list, `rules`, whose entries have exactly
 * the fields of createRule's input (tenantId, name, scope, attributeKeys,
 * when, resource, method, algorithm, limit, window, windowUnit, burst, action,
 * failureMode, reach, priority, enabled), with the same defaults:
 *
 *   rules:
 *     - tenantId: acme
 *       name: per-user
 *       scope: [USER]
 *       limit: 100
 *       window: 1
 *       windowUnit: MINUTES
 *
 * Reading keeps where every value stands, so that each problem the domain's
 * validation finds (named by its field, "rules[2].limit") is reported with
 * its line and column. Writing leaves out what equals its default, so an
 * exported file reads like a hand-written one and re-imports unchanged.
 */

import { Document, isMap, isScalar, isSeq, LineCounter, parseDocument, visit, type Node } from "yaml";
import { overrideIdentity, type Override } from "../../domain/override.js";
import { RULE_DEFAULTS, type Rule, type RuleSpec } from "../../domain/rule.js";
import type { RuleInput } from "../../domain/rule-validation.js";

/** The fields of a rule in the file, in the order an export writes them. */
const RULE_FILE_FIELDS: readonly (keyof RuleSpec)[] = [
  "tenantId",
  "name",
  "scope",
  "attributeKeys",
  "when",
  "resource",
  "method",
  "algorithm",
  "limit",
  "window",
  "windowUnit",
  "burst",
  "action",
  "failureMode",
  "reach",
  "priority",
  "enabled",
  "autoBan",
];

const FLOW_LISTS = new Set(["scope", "attributeKeys", "values"]);

/** The fields of an override in a rule's `overrides` (setOverride's input but its ruleId), in the order an export writes them. */
export const OVERRIDE_FILE_FIELDS = ["dimension", "attributeKey", "match", "identifier", "limit", "burst", "window", "windowUnit", "expiresAt", "note"] as const;

/** Written even when equal to a default: what a reader needs to recognise a rule. */
const ALWAYS_WRITTEN = new Set<keyof RuleSpec>(["tenantId", "name", "limit", "window"]);

export interface Position {
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
}

/** Something wrong with the file: where, which field (null for the YAML itself), and what. */
export interface FileProblem {
  position: Position | null;
  field: string | null;
  message: string;
}

export interface RuleEntry {
  /** The entry's index in `rules`: its fields are named rules[index].<field>. */
  index: number;
  position: Position;
  input: RuleInput;
  /** The entry's `overrides` as written; undefined when it has none (the rule's overrides are then left alone). */
  overrides: unknown;
}

export interface RulesFile {
  entries: RuleEntry[];
  /** How many entries `rules` holds, the ones that are not mappings included. */
  size: number;
  /** What is wrong with the file's shape (YAML syntax, unknown fields, an entry that is not a mapping). */
  problems: FileProblem[];
  /** Where the value a field path names stands ("rules[2].scope[1]"); for a missing field, where its nearest enclosing value does. */
  positionOf(field: string): Position | null;
}

export function entryPrefix(index: number): string {
  return `rules[${index}]`;
}

export function readRulesFile(text: string): RulesFile {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const at = (node: Node | null | undefined): Position | null => {
    const offset = node?.range?.[0];
    if (offset === undefined) return null;
    const { line, col } = lines.linePos(offset);
    return { line, column: col };
  };
  const positionOf = (field: string): Position | null => {
    const path = fieldPath(field);
    while (path.length > 0) {
      const node = doc.getIn(path, true) as Node | undefined;
      if (node !== undefined && node !== null) return at(node);
      path.pop();
    }
    return at(doc.contents);
  };
  const problems: FileProblem[] = doc.errors.map((error) => {
    const { line, col } = lines.linePos(error.pos[0]);
    return { position: { line, column: col }, field: null, message: error.message };
  });
  const file: RulesFile = { entries: [], size: 0, problems, positionOf };
  if (problems.length > 0) return file;

  const root = doc.contents;
  if (!isMap(root)) {
    const shape = root === null ? "is empty" : "is not a mapping";
    problems.push({ position: at(root) ?? { line: 1, column: 1 }, field: null, message: `the file ${shape}: it must hold \`rules:\`, a list of rules` });
    return file;
  }
  let rules: unknown = undefined;
  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
    if (key === "rules") rules = pair.value;
    else problems.push({ position: at(pair.key as Node), field: key, message: `${key} is not a field of a rules file: it holds only \`rules:\`` });
  }
  if (!isSeq(rules)) {
    problems.push({
      position: at(rules as Node) ?? at(root),
      field: "rules",
      message: rules === undefined ? "rules is required: a list of rules (use [] for none)" : "rules must be a list of rules (use [] for none)",
    });
    return file;
  }
  file.size = rules.items.length;
  rules.items.forEach((item, index) => {
    const prefix = entryPrefix(index);
    const position = at(item as Node) ?? at(rules as Node)!;
    if (!isMap(item)) {
      problems.push({ position, field: prefix, message: `${prefix} must be a mapping of rule fields` });
      return;
    }
    const input: RuleInput = {};
    let overrides: unknown = undefined;
    let readable = true;
    for (const pair of item.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      if (!(RULE_FILE_FIELDS as readonly string[]).includes(key) && key !== "overrides") {
        problems.push({
          position: at(pair.key as Node),
          field: `${prefix}.${key}`,
          message: `${prefix}.${key} is not a rule field; the fields are ${RULE_FILE_FIELDS.join(", ")}, overrides`,
        });
        continue;
      }
      const field = `${prefix}.${key}`;
      const value = plainValue(pair.value as Node | null, doc);
      if ("unreadable" in value) {
        problems.push({ position: at(pair.value as Node), field, message: `${field} cannot be read: ${value.unreadable}` });
        readable = false;
      } else if (key === "overrides") {
        overrides = value.value;
      } else {
        input[key as keyof RuleSpec] = value.value;
      }
    }
    // An entry missing a value it has would be validated as if it left the field out.
    if (readable) file.entries.push({ index, position, input, overrides });
  });
  return file;
}

/**
 * A value as plain data. Expanding its aliases can fail: an alias to an
 * anchor that is not set, or one that expands too far (the yaml library stops
 * a "billion laughs" alias bomb by throwing). That is a problem of the file,
 * to report with its line like any other, not a fault of the service.
 */
function plainValue(node: Node | null, doc: Document.Parsed): { value: unknown } | { unreadable: string } {
  if (node === null) return { value: null };
  try {
    return { value: node.toJS(doc) };
  } catch (error) {
    if (error instanceof ReferenceError) return { unreadable: error.message };
    throw error;
  }
}

/**
 * The rules as a rules file, sorted by tenant and name, each without the
 * fields that equal their defaults, and with its overrides (`overrides` by
 * rule id) sorted by target, match and identifier.
 */
export function writeRulesFile(rules: readonly Rule[], overrides: ReadonlyMap<string, readonly Override[]> = new Map()): string {
  const sorted = [...rules].sort((a, b) => compare(a.tenantId, b.tenantId) || compare(a.name, b.name));
  const doc = new Document({
    rules: sorted.map((rule) => {
      const own = overrides.get(rule.id) ?? [];
      return own.length === 0 ? fileFields(rule) : { ...fileFields(rule), overrides: [...own].sort(byOverrideIdentity).map(overrideFileFields) };
    }),
  });
  doc.commentBefore = " Floodgate rules: import with importRules or `npm run rules -- import FILE`; README.md describes the fields.";
  visit(doc, {
    Pair(_, pair) {
      // Lists of names read best on one line: scope: [USER, IP], attributeKeys: [plan], values: [free, trial].
      if (isScalar(pair.key) && FLOW_LISTS.has(String(pair.key.value)) && isSeq(pair.value)) pair.value.flow = true;
    },
  });
  // A blank line between rules.
  const list = doc.get("rules", true);
  if (isSeq(list)) {
    list.items.forEach((item, i) => {
      if (i > 0 && isMap(item)) item.spaceBefore = true;
    });
  }
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

function fileFields(rule: Rule): Partial<RuleSpec> {
  const fields: Partial<RuleSpec> = {};
  for (const field of RULE_FILE_FIELDS) {
    const value = rule[field];
    const fallback = (RULE_DEFAULTS as Partial<RuleSpec>)[field];
    const isDefault = Array.isArray(value) ? value.length === 0 && Array.isArray(fallback) : value === fallback;
    if (ALWAYS_WRITTEN.has(field) || !isDefault) (fields as Record<string, unknown>)[field] = value;
  }
  return fields;
}

function overrideFileFields(override: Override): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const field of OVERRIDE_FILE_FIELDS) {
    const value = field === "expiresAt" ? (override.expiresAt?.toISOString() ?? null) : override[field];
    if (value !== null && !(field === "match" && value === "EXACT")) fields[field] = value;
  }
  return fields;
}

function byOverrideIdentity(a: Override, b: Override): number {
  return compare(overrideIdentity(a), overrideIdentity(b));
}

/** "rules[2].scope[1]" -> ["rules", 2, "scope", 1]. */
function fieldPath(field: string): (string | number)[] {
  return [...field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? m[1]! : Number(m[2])));
}

/** Plain code-point order, the same on every machine (an export must be byte-for-byte stable). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
