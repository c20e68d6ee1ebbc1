/**
 * Validation of rule input at the edge: every field checked, each failure
 * naming the field as the caller wrote it. The same checks serve the GraphQL
 * mutations and the YAML import.
 */

import { MAX_EXACT } from "./algorithms/index.js";
import { attributeKey, attributeValue, type AttributeCondition } from "./attributes.js";
import { autoBanDimension, MAX_BAN_SECONDS } from "./ban.js";
import { CALENDAR_DEFAULTS, CALENDAR_PERIODS, WEEKDAYS, canonicalTimeZone, type Calendar } from "./calendar.js";
import { ValidationError } from "./errors.js";
import { bool, integer, oneOf, text } from "./validation.js";
import { validateGlob } from "./glob.js";
import { httpMethod } from "./request.js";
import { ATTRIBUTE_BOUNDS, LENGTHS, RULE_BOUNDS } from "./service-limits.js";
import {
  ACTIONS,
  ALGORITHMS,
  DIMENSIONS,
  FAILURE_MODES,
  REACHES,
  RULE_DEFAULTS,
  WINDOW_UNITS,
  capacityOf,
  windowSecondsOf,
  type Rule,
  type RuleSpec,
} from "./rule.js";

/** The fields a change may clear with null. */
const NULLABLE = new Set<keyof RuleSpec>(["resource", "method", "burst", "calendar", "autoBan"]);

/** Rule input as it arrives: any field may be missing (defaults apply) or of the wrong kind. */
export type RuleInput = { [K in keyof RuleSpec]?: unknown };

/** A validated value, or every problem found in the input (the YAML import reports them all at once). */
export type Checked<T> = { ok: true; value: T } | { ok: false; errors: ValidationError[] };

export function validateNewRule(input: RuleInput, prefix = "input"): RuleSpec {
  return orThrowFirst(checkNewRule(input, prefix));
}

/** validateNewRule's checks, collecting every failing field instead of stopping at the first. */
export function checkNewRule(input: RuleInput, prefix = "input"): Checked<RuleSpec> {
  const withDefaults: RuleInput = { ...RULE_DEFAULTS };
  for (const [field, value] of Object.entries(input) as [keyof RuleSpec, unknown][]) {
    // A null where the contract has a non-null default means "not given", as an absent field does.
    const useDefault = value === undefined || (value === null && defaultOf(field) !== null && defaultOf(field) !== undefined);
    if (!useDefault) withDefaults[field] = value;
  }
  return checkRuleSpec(withDefaults, prefix);
}

function defaultOf(field: keyof RuleSpec): unknown {
  return (RULE_DEFAULTS as Partial<RuleSpec>)[field];
}

/** A change to an existing rule: fields left undefined keep their value; null clears the nullable ones. */
export function validateRuleChange(current: Rule, change: RuleInput, prefix = "input"): RuleSpec {
  if ("tenantId" in change && change.tenantId !== undefined && change.tenantId !== current.tenantId) {
    throw new ValidationError(`${prefix}.tenantId`, "cannot change: a rule stays with its tenant");
  }
  const merged: RuleInput = { ...specOf(current) };
  for (const [field, value] of Object.entries(change) as [keyof RuleSpec, unknown][]) {
    if (value === undefined) continue;
    if (value === null && !NULLABLE.has(field)) {
      throw new ValidationError(`${prefix}.${field}`, "cannot be null (leave it out to keep the current value)");
    }
    merged[field] = value;
  }
  return orThrowFirst(checkRuleSpec(merged, prefix));
}

export function specOf(rule: Rule): RuleSpec {
  const { id: _id, version: _version, createdAt: _createdAt, updatedAt: _updatedAt, ...spec } = rule;
  return spec;
}

/** Whether two validated specs describe the same rule (a change to it would change nothing). */
export function sameSpec(a: RuleSpec, b: RuleSpec): boolean {
  return (Object.keys(a) as (keyof RuleSpec)[]).every((field) =>
    typeof a[field] === "object" && a[field] !== null ? JSON.stringify(a[field]) === JSON.stringify(b[field]) : a[field] === b[field],
  );
}

function orThrowFirst<T>(checked: Checked<T>): T {
  if (!checked.ok) throw checked.errors[0]!;
  return checked.value;
}

function checkRuleSpec(input: RuleInput, prefix: string): Checked<RuleSpec> {
  const errors: ValidationError[] = [];
  const collect = <T>(check: () => T): T => {
    try {
      return check();
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      errors.push(error);
      return undefined as T;
    }
  };
  const f = (name: keyof RuleSpec) => `${prefix}.${name}`;
  const spec: RuleSpec = {
    tenantId: collect(() => text(input.tenantId, f("tenantId"), LENGTHS.tenantId)),
    name: collect(() => text(input.name, f("name"), LENGTHS.ruleName)),
    scope: collect(() => scope(input.scope, f("scope"))),
    attributeKeys: collect(() => attributeKeys(input.attributeKeys, f("attributeKeys"))),
    when: collect(() => conditions(input.when, f("when"))),
    resource: collect(() => resource(input.resource, f("resource"))),
    method: collect(() => method(input.method, f("method"))),
    algorithm: collect(() => oneOf(input.algorithm, ALGORITHMS, f("algorithm"))),
    limit: collect(() => integer(input.limit, f("limit"), 1, RULE_BOUNDS.maxLimit)),
    window: collect(() => integer(input.window, f("window"), 1, 2 ** 31 - 1)),
    windowUnit: collect(() => oneOf(input.windowUnit, WINDOW_UNITS, f("windowUnit"))),
    calendar: collect(() => calendar(input.calendar, f("calendar"))),
    burst: collect(() => (input.burst === null || input.burst === undefined ? null : integer(input.burst, f("burst"), 1, RULE_BOUNDS.maxLimit))),
    action: collect(() => oneOf(input.action, ACTIONS, f("action"))),
    failureMode: collect(() => oneOf(input.failureMode, FAILURE_MODES, f("failureMode"))),
    reach: collect(() => oneOf(input.reach, REACHES, f("reach"))),
    priority: collect(() => integer(input.priority, f("priority"), -(2 ** 31), 2 ** 31 - 1)),
    enabled: collect(() => bool(input.enabled, f("enabled"))),
    autoBan: collect(() => autoBan(input.autoBan, f("autoBan"))),
  };
  // The checks across fields need every field they read to be valid.
  if (errors.length === 0) collect(() => validateAcrossFields(spec, f));
  return errors.length === 0 ? { ok: true, value: spec } : { ok: false, errors };
}

/** The checks across limit, burst, window and algorithm; overrides meet them too, on the rule as they make it. */
export function validateAcrossFields(spec: RuleSpec, f: (name: keyof RuleSpec) => string): void {
  const seconds = windowSecondsOf(spec.window, spec.windowUnit);
  if (seconds > RULE_BOUNDS.maxWindowSeconds) {
    throw new ValidationError(f("window"), `must be at most 366 days (got ${spec.window} ${spec.windowUnit.toLowerCase()})`);
  }
  if (spec.reach === "GLOBAL" && spec.algorithm !== "FIXED_WINDOW" && spec.algorithm !== "SLIDING_WINDOW_COUNTER") {
    throw new ValidationError(
      f("reach"),
      `GLOBAL needs FIXED_WINDOW or SLIDING_WINDOW_COUNTER, whose counts per window add up across regions (got ${spec.algorithm})`,
    );
  }
  if (spec.calendar !== null && spec.algorithm !== "FIXED_WINDOW") {
    throw new ValidationError(
      f("calendar"),
      `needs FIXED_WINDOW, whose count starts again when a period starts (got ${spec.algorithm}); a sliding or draining limit has no period boundary to reset on`,
    );
  }
  if (spec.algorithm === "CONCURRENCY" && spec.action === "THROTTLE") {
    throw new ValidationError(f("action"), "THROTTLE cannot hold a request for CONCURRENCY, whose slots free when requests end, not at a time known ahead; use REJECT or LOG_ONLY");
  }
  if (spec.algorithm === "CONCURRENCY" && spec.limit > RULE_BOUNDS.maxLogLimit) {
    throw new ValidationError(f("limit"), `must be at most ${RULE_BOUNDS.maxLogLimit} for CONCURRENCY, which stores one lease per request in flight`);
  }
  if (spec.autoBan !== null && autoBanDimension(spec.scope) === null) {
    throw new ValidationError(f("autoBan"), `needs a rule whose scope has USER, IP, API_KEY or CLIENT: that is what it bans (got scope [${spec.scope.join(", ")}])`);
  }
  if (spec.algorithm === "SLIDING_WINDOW_LOG" && spec.limit > RULE_BOUNDS.maxLogLimit) {
    throw new ValidationError(
      f("limit"),
      `must be at most ${RULE_BOUNDS.maxLogLimit} for SLIDING_WINDOW_LOG, which stores one entry per admitted request; use SLIDING_WINDOW_COUNTER above that`,
    );
  }
  if (spec.algorithm === "TOKEN_BUCKET" || spec.algorithm === "LEAKY_BUCKET") {
    const exactUnits = (capacityOf(spec) + spec.limit) * seconds * 1000;
    if (exactUnits > MAX_EXACT) {
      throw new ValidationError(
        f(spec.burst === null ? "limit" : "burst"),
        `is too large for a ${spec.window} ${spec.windowUnit.toLowerCase()} window: ${spec.algorithm} keeps fractions of tokens exactly, which needs (burst + limit) x window in ms <= 2^52; shorten the window or lower the numbers`,
      );
    }
  }
}

/** A calendar as `{ period, timeZone, weekStartsOn }`, defaults filled in; the time zone by the name Intl gives it. */
function calendar(value: unknown, field: string): Calendar | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "object" || Array.isArray(value)) throw new ValidationError(field, "must be { period, timeZone, weekStartsOn }");
  const { period, timeZone, weekStartsOn, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new ValidationError(`${field}.${unknown}`, "is not a field of a calendar; its fields are period, timeZone and weekStartsOn");
  const checkedPeriod = oneOf(period, CALENDAR_PERIODS, `${field}.period`);
  const zone = timeZone === null || timeZone === undefined ? CALENDAR_DEFAULTS.timeZone : text(timeZone, `${field}.timeZone`, LENGTHS.timeZone);
  const canonical = canonicalTimeZone(zone);
  if (canonical === null) throw new ValidationError(`${field}.timeZone`, `must be an IANA time zone such as "Europe/Berlin" (got ${JSON.stringify(zone)})`);
  const startsOn = weekStartsOn === null || weekStartsOn === undefined ? null : oneOf(weekStartsOn, WEEKDAYS, `${field}.weekStartsOn`);
  if (startsOn !== null && checkedPeriod !== "WEEK") throw new ValidationError(`${field}.weekStartsOn`, `is only for period WEEK (got period ${checkedPeriod})`);
  return { period: checkedPeriod, timeZone: canonical, weekStartsOn: checkedPeriod === "WEEK" ? (startsOn ?? CALENDAR_DEFAULTS.weekStartsOn) : null };
}

/** The most refusals an autoBan may wait for, and the longest it may count them over (a day). */
const AUTO_BAN_BOUNDS = { maxRefusals: 1_000_000, maxWithinSeconds: 86_400 };

function autoBan(value: unknown, field: string): RuleSpec["autoBan"] {
  if (value === null || value === undefined) return null;
  if (typeof value !== "object" || Array.isArray(value)) throw new ValidationError(field, "must be { refusals, withinSeconds, banSeconds }");
  const { refusals, withinSeconds, banSeconds, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new ValidationError(`${field}.${unknown}`, "is not a field of autoBan; its fields are refusals, withinSeconds and banSeconds");
  return {
    refusals: integer(refusals, `${field}.refusals`, 1, AUTO_BAN_BOUNDS.maxRefusals),
    withinSeconds: integer(withinSeconds, `${field}.withinSeconds`, 1, AUTO_BAN_BOUNDS.maxWithinSeconds),
    banSeconds: integer(banSeconds, `${field}.banSeconds`, 1, MAX_BAN_SECONDS),
  };
}

function scope(value: unknown, field: string): RuleSpec["scope"] {
  if (!Array.isArray(value)) throw new ValidationError(field, "must be a list of dimensions");
  const dimensions = value.map((d, i) => oneOf(d, DIMENSIONS, `${field}[${i}]`));
  const repeated = dimensions.find((d, i) => dimensions.indexOf(d) !== i);
  if (repeated) throw new ValidationError(field, `lists ${repeated} twice`);
  return DIMENSIONS.filter((d) => dimensions.includes(d));
}

/** Sorted, so that one set of keys is one rule however it is listed (and one bucket key order). */
function attributeKeys(value: unknown, field: string): string[] {
  if (!Array.isArray(value)) throw new ValidationError(field, "must be a list of attribute keys");
  if (value.length > ATTRIBUTE_BOUNDS.keysPerRule) {
    throw new ValidationError(field, `must list at most ${ATTRIBUTE_BOUNDS.keysPerRule} attribute keys (got ${value.length})`);
  }
  const keys = value.map((key, i) => attributeKey(key, `${field}[${i}]`));
  const repeated = keys.find((key, i) => keys.indexOf(key) !== i);
  if (repeated !== undefined) throw new ValidationError(field, `lists ${JSON.stringify(repeated)} twice`);
  return keys.sort(byCodePoint);
}

function conditions(value: unknown, field: string): AttributeCondition[] {
  if (!Array.isArray(value)) throw new ValidationError(field, "must be a list of conditions, each { key, values }");
  if (value.length > ATTRIBUTE_BOUNDS.conditionsPerRule) {
    throw new ValidationError(field, `must hold at most ${ATTRIBUTE_BOUNDS.conditionsPerRule} conditions (got ${value.length})`);
  }
  const checked = value.map((condition, i): AttributeCondition => {
    const at = `${field}[${i}]`;
    if (typeof condition !== "object" || condition === null || Array.isArray(condition)) throw new ValidationError(at, "must be { key, values }");
    const { key, values, ...rest } = condition as Record<string, unknown>;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) throw new ValidationError(`${at}.${unknown}`, "is not a field of a condition; its fields are key and values");
    if (!Array.isArray(values) || values.length === 0) throw new ValidationError(`${at}.values`, "must be a list of one or more values");
    if (values.length > ATTRIBUTE_BOUNDS.valuesPerCondition) {
      throw new ValidationError(`${at}.values`, `must hold at most ${ATTRIBUTE_BOUNDS.valuesPerCondition} values (got ${values.length})`);
    }
    const texts = values.map((v, j) => attributeValue(v, `${at}.values[${j}]`));
    const repeated = texts.find((v, j) => texts.indexOf(v) !== j);
    if (repeated !== undefined) throw new ValidationError(`${at}.values`, `lists ${JSON.stringify(repeated)} twice`);
    return { key: attributeKey(key, `${at}.key`), values: texts };
  });
  const repeated = checked.find((c, i) => checked.findIndex((other) => other.key === c.key) !== i);
  if (repeated !== undefined) throw new ValidationError(field, `has two conditions on ${JSON.stringify(repeated.key)}: give one its values`);
  return checked.sort((a, b) => byCodePoint(a.key, b.key));
}

function byCodePoint(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function resource(value: unknown, field: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") throw new ValidationError(field, "must be a string");
  return validateGlob(value, field).source;
}

function method(value: unknown, field: string): RuleSpec["method"] {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") throw new ValidationError(field, "must be a string");
  if (value === "") throw new ValidationError(field, "must not be empty (leave it null to match every method)");
  return httpMethod(value, field);
}
