/**
 * The rules file: YAML holding one list, `rules`, whose entries have exactly
 * the fields of createRule's input (tenantId, name, scope, attributeKeys,
 * when, resource, method, algorithm, limit, window, windowUnit, calendar,
 * burst, action, failureMode, reach, priority, enabled), with the same
 * defaults:
 *
 *   rules:
 *     - tenantId: acme
 *       name: per-user
 *       scope: [USER]
 *       limit: 100
 *       window: 1
 *       windowUnit: MINUTES
 *
 * and, optionally, `lists`: access list entries with exactly the fields of
 * addListEntry's input (tenantId, list, kind, value, note, expiresAt):
 *
 *   lists:
 *     - tenantId: acme
 *       list: DENY
 *       kind: IP
 *       value: 10.0.0.0/8
 *
 * Reading keeps where every value stands, so that each problem the domain's
 * validation finds (named by its field, "rules[2].limit") is reported with
 * its line and column. Writing leaves out what equals its default, so an
 * exported file reads like a hand-written one and re-imports unchanged.
 */

import { Document, isMap, isScalar, isSeq, LineCounter, parseDocument, visit, type Node } from "yaml";
import type { ListEntry } from "../../domain/access-list.js";
import type { Calendar } from "../../domain/calendar.js";
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
  "calendar",
  "burst",
  "action",
  "failureMode",
  "reach",
  "priority",
  "enabled",
  "autoBan",
];

const FLOW_LISTS = new Set(["scope", "attributeKeys", "values"]);
/** Mappings that read best on one line too: calendar: {period: MONTH, timeZone: Europe/Berlin}. */
const FLOW_MAPS = new Set(["calendar"]);

/** The fields of an override in a rule's `overrides` (setOverride's input but its ruleId), in the order an export writes them. */
export const OVERRIDE_FILE_FIELDS = ["dimension", "attributeKey", "match", "identifier", "limit", "burst", "window", "windowUnit", "expiresAt", "note"] as const;

/** The fields of an access list entry in `lists` (addListEntry's input), in the order an export writes them. */
export const LIST_ENTRY_FILE_FIELDS = ["tenantId", "list", "kind", "value", "note", "expiresAt"] as const;

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

/** One entry of `lists`, its fields named lists[index].<field>. */
export interface ListEntryLine {
  index: number;
  position: Position;
  input: Record<string, unknown>;
}

export interface RulesFile {
  entries: RuleEntry[];
  /** The entries of `lists` that are mappings of known fields; empty when the file has no `lists`. */
  lists: ListEntryLine[];
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
  const file: RulesFile = { entries: [], lists: [], size: 0, problems, positionOf };
  if (problems.length > 0) return file;

  const root = doc.contents;
  if (!isMap(root)) {
    const shape = root === null ? "is empty" : "is not a mapping";
    problems.push({ position: at(root) ?? { line: 1, column: 1 }, field: null, message: `the file ${shape}: it must hold \`rules:\`, a list of rules` });
    return file;
  }
  let rules: unknown = undefined;
  let lists: unknown = undefined;
  for (const pair of root.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
    if (key === "rules") rules = pair.value;
    else if (key === "lists") lists = pair.value;
    else problems.push({ position: at(pair.key as Node), field: key, message: `${key} is not a field of a rules file: it holds only \`rules:\` and \`lists:\`` });
  }
  if (lists !== undefined) readLists(lists as Node | null, file, doc, at);
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

/** `lists`: each entry a mapping of LIST_ENTRY_FILE_FIELDS, kept with its position; what is not is a problem. */
function readLists(lists: Node | null, file: RulesFile, doc: Document.Parsed, at: (node: Node | null | undefined) => Position | null): void {
  if (!isSeq(lists)) {
    file.problems.push({ position: at(lists), field: "lists", message: "lists must be a list of access list entries (leave it out, or use [], for none)" });
    return;
  }
  lists.items.forEach((item, index) => {
    const prefix = `lists[${index}]`;
    const position = at(item as Node) ?? at(lists)!;
    if (!isMap(item)) {
      file.problems.push({ position, field: prefix, message: `${prefix} must be a mapping of access list entry fields` });
      return;
    }
    const input: Record<string, unknown> = {};
    for (const pair of item.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const field = `${prefix}.${key}`;
      if (!(LIST_ENTRY_FILE_FIELDS as readonly string[]).includes(key)) {
        file.problems.push({ position: at(pair.key as Node), field, message: `${field} is not an access list entry field; the fields are ${LIST_ENTRY_FILE_FIELDS.join(", ")}` });
        return;
      }
      const value = plainValue(pair.value as Node | null, doc);
      if ("unreadable" in value) {
        file.problems.push({ position: at(pair.value as Node), field, message: `${field} cannot be read: ${value.unreadable}` });
        return;
      }
      input[key] = value.value;
    }
    file.lists.push({ index, position, input });
  });
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
 * rule id) sorted by target, match and identifier; then the access list
 * entries (`lists`, left out when there are none) sorted by tenant, list,
 * kind and value.
 */
export function writeRulesFile(rules: readonly Rule[], overrides: ReadonlyMap<string, readonly Override[]> = new Map(), entries: readonly ListEntry[] = []): string {
  const sorted = [...rules].sort((a, b) => compare(a.tenantId, b.tenantId) || compare(a.name, b.name));
  const doc = new Document({
    rules: sorted.map((rule) => {
      const own = overrides.get(rule.id) ?? [];
      return own.length === 0 ? fileFields(rule) : { ...fileFields(rule), overrides: [...own].sort(byOverrideIdentity).map(overrideFileFields) };
    }),
    ...(entries.length === 0 ? {} : { lists: [...entries].sort(byListEntryIdentity).map(listEntryFileFields) }),
  });
  doc.commentBefore = " Floodgate rules: import with importRules or `npm run rules -- import FILE`; README.md describes the fields.";
  visit(doc, {
    Pair(_, pair) {
      // Lists of names read best on one line: scope: [USER, IP], attributeKeys: [plan], values: [free, trial].
      if (isScalar(pair.key) && FLOW_LISTS.has(String(pair.key.value)) && isSeq(pair.value)) pair.value.flow = true;
      if (isScalar(pair.key) && FLOW_MAPS.has(String(pair.key.value)) && isMap(pair.value)) pair.value.flow = true;
    },
  });
  // A blank line between rules, and before the lists.
  const list = doc.get("rules", true);
  if (isSeq(list)) {
    list.items.forEach((item, i) => {
      if (i > 0 && isMap(item)) item.spaceBefore = true;
    });
  }
  const listsPair = isMap(doc.contents) ? doc.contents.items.find((pair) => isScalar(pair.key) && pair.key.value === "lists") : undefined;
  if (listsPair !== undefined && isScalar(listsPair.key)) listsPair.key.spaceBefore = true;
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

function fileFields(rule: Rule): Partial<RuleSpec> {
  const fields: Partial<RuleSpec> = {};
  for (const field of RULE_FILE_FIELDS) {
    const value = field === "calendar" ? calendarFileFields(rule.calendar) : rule[field];
    const fallback = (RULE_DEFAULTS as Partial<RuleSpec>)[field];
    const isDefault = Array.isArray(value) ? value.length === 0 && Array.isArray(fallback) : value === fallback;
    if (ALWAYS_WRITTEN.has(field) || !isDefault) (fields as Record<string, unknown>)[field] = value;
  }
  return fields;
}

/** A calendar without its weekStartsOn where it has none (any period but WEEK). */
function calendarFileFields(calendar: Calendar | null): Partial<Calendar> | null {
  if (calendar === null) return null;
  const { weekStartsOn, ...rest } = calendar;
  return weekStartsOn === null ? rest : calendar;
}

function overrideFileFields(override: Override): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const field of OVERRIDE_FILE_FIELDS) {
    const value = field === "expiresAt" ? (override.expiresAt?.toISOString() ?? null) : override[field];
    if (value !== null && !(field === "match" && value === "EXACT")) fields[field] = value;
  }
  return fields;
}

function listEntryFileFields(entry: ListEntry): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const field of LIST_ENTRY_FILE_FIELDS) {
    const value = field === "expiresAt" ? (entry.expiresAt?.toISOString() ?? null) : entry[field];
    if (value !== null) fields[field] = value;
  }
  return fields;
}

function byListEntryIdentity(a: ListEntry, b: ListEntry): number {
  return compare(a.tenantId, b.tenantId) || compare(a.list, b.list) || compare(a.kind, b.kind) || compare(a.value, b.value);
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
