/**
 * An override: one rule's limit replaced for the buckets of one identifier,
 * up or down ("this customer may do 10x", "this key gets 1 a minute"),
 * without a rule per customer. It names one of the values the rule's buckets
 * are keyed by (a dimension of its scope, TENANT for a "*" rule, or one of
 * its attribute keys) exactly, by a glob ("*@acme.com": "*" is any run of
 * characters), or, for IP, by a CIDR block ("10.0.0.0/8"). It replaces the
 * rule's limit, and its burst and window if it gives them, optionally until
 * an expiry time.
 *
 * Precedence, for one bucket: an exact override beats every glob and CIDR;
 * among globs the most specific wins (the most literal characters), among
 * CIDR blocks the longest prefix; then the rule. When several of the
 * rule's values have overrides, the earliest in the bucket key's order
 * decides (dimensions in their order, then attribute keys), exact ones first.
 * An expired override is as if it did not exist.
 */

import { attributeKey } from "./attributes.js";
import { ValidationError } from "./errors.js";
import { validateAcrossFields } from "./rule-validation.js";
import type { Dimension, Rule, RuleSpec, WindowUnit } from "./rule.js";
import { DIMENSIONS, WINDOW_UNITS, ALL_TENANTS } from "./rule.js";
import { ipAddress } from "./request.js";
import { LENGTHS, RULE_BOUNDS } from "./service-limits.js";
import { integer, oneOf, text } from "./validation.js";

export const OVERRIDE_MATCHES = ["EXACT", "GLOB", "CIDR"] as const;
export type OverrideMatch = (typeof OVERRIDE_MATCHES)[number];

/** Which of the rule's values an override names: a dimension, or an attribute key. */
export type OverrideTarget = { dimension: Dimension; attributeKey: null } | { dimension: null; attributeKey: string };

export interface OverrideSpec {
  ruleId: string;
  dimension: Dimension | null;
  attributeKey: string | null;
  match: OverrideMatch;
  /** The value, glob or CIDR block; an exact IP and a CIDR block are stored canonical. */
  identifier: string;
  limit: number;
  /** Null: the bucket's capacity is the override's limit. */
  burst: number | null;
  /** Null (both): the rule's window. */
  window: number | null;
  windowUnit: WindowUnit | null;
  expiresAt: Date | null;
  note: string | null;
}

export interface Override extends OverrideSpec {
  id: string;
  tenantId: string;
  /** The rule's version this override was last written with: the order in which changes to it are applied. */
  version: number;
  actor: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What an override is known by: setting one with the same target, match and identifier replaces it. */
export function overrideIdentity(o: Pick<OverrideSpec, "ruleId" | "dimension" | "attributeKey" | "match" | "identifier">): string {
  return [o.ruleId, o.dimension ?? "", o.attributeKey ?? "", o.match, o.identifier].join("\n");
}

export interface OverrideInput {
  ruleId: string;
  dimension?: unknown;
  attributeKey?: unknown;
  match?: unknown;
  identifier?: unknown;
  limit?: unknown;
  burst?: unknown;
  window?: unknown;
  windowUnit?: unknown;
  expiresAt?: unknown;
  note?: unknown;
}

/** The dimensions and attribute keys a rule's buckets are keyed by, in the bucket key's order. */
export function keyedTargets(rule: Pick<RuleSpec, "tenantId" | "scope" | "attributeKeys">): OverrideTarget[] {
  const keyed = rule.scope.length > 0 || rule.attributeKeys.length > 0;
  const dimensions = DIMENSIONS.filter((d) => rule.scope.includes(d) || (d === "TENANT" && rule.tenantId === ALL_TENANTS && keyed));
  return [
    ...dimensions.map((dimension): OverrideTarget => ({ dimension, attributeKey: null })),
    ...[...rule.attributeKeys].sort().map((key): OverrideTarget => ({ dimension: null, attributeKey: key })),
  ];
}

export function validateOverride(input: OverrideInput, rule: Rule, now: Date, prefix = "input"): OverrideSpec {
  const f = (name: string) => `${prefix}.${name}`;
  const target = overrideTarget(input, rule, f);
  const match = input.match === null || input.match === undefined ? "EXACT" : oneOf(input.match, OVERRIDE_MATCHES, f("match"));
  const identifier = overrideIdentifier(input.identifier, match, target, f("identifier"));
  const limit = integer(input.limit, f("limit"), 1, RULE_BOUNDS.maxLimit);
  const burst = input.burst === null || input.burst === undefined ? null : integer(input.burst, f("burst"), 1, RULE_BOUNDS.maxLimit);
  if (burst !== null && rule.algorithm !== "TOKEN_BUCKET" && rule.algorithm !== "LEAKY_BUCKET") {
    throw new ValidationError(f("burst"), `applies to TOKEN_BUCKET and LEAKY_BUCKET only (the rule is ${rule.algorithm})`);
  }
  const window = input.window === null || input.window === undefined ? null : integer(input.window, f("window"), 1, 2 ** 31 - 1);
  const windowUnit = input.windowUnit === null || input.windowUnit === undefined ? null : oneOf(input.windowUnit, WINDOW_UNITS, f("windowUnit"));
  if (windowUnit !== null && window === null) throw new ValidationError(f("windowUnit"), "needs a window");
  if (window !== null && rule.calendar !== null) throw new ValidationError(f("window"), `cannot be given for a rule with a calendar: its window is the calendar's ${rule.calendar.period}`);
  const expiresAt = expiry(input.expiresAt, now, f("expiresAt"));
  const note = input.note === null || input.note === undefined ? null : text(input.note, f("note"), LENGTHS.ruleName);
  const spec: OverrideSpec = { ruleId: rule.id, ...target, match, identifier, limit, burst, window, windowUnit: window === null ? null : (windowUnit ?? "SECONDS"), expiresAt, note };
  validateAcrossFields(effectiveSpec(rule, spec), f);
  return spec;
}

/** The rule as it stands for the buckets the override matches. */
export function effectiveSpec<R extends Pick<Rule, "limit" | "burst" | "window" | "windowUnit">>(rule: R, override: Pick<OverrideSpec, "limit" | "burst" | "window" | "windowUnit">): R {
  return {
    ...rule,
    limit: override.limit,
    burst: override.burst,
    window: override.window ?? rule.window,
    windowUnit: override.window === null ? rule.windowUnit : (override.windowUnit ?? "SECONDS"),
  };
}

function overrideTarget(input: OverrideInput, rule: Rule, f: (name: string) => string): OverrideTarget {
  const given = (v: unknown) => v !== null && v !== undefined;
  if (given(input.attributeKey)) attributeKey(input.attributeKey, f("attributeKey"));
  if (given(input.dimension) === given(input.attributeKey)) {
    throw new ValidationError(f("dimension"), "or attributeKey: give exactly one, the value of the rule's buckets the override names");
  }
  const targets = keyedTargets(rule);
  const names = targets.map((t) => t.dimension ?? `attribute ${t.attributeKey}`).join(", ") || "nothing (one bucket for the whole rule)";
  if (given(input.dimension)) {
    const dimension = oneOf(input.dimension, DIMENSIONS, f("dimension"));
    if (!targets.some((t) => t.dimension === dimension)) throw new ValidationError(f("dimension"), `${dimension} is not what the rule's buckets are keyed by: ${names}`);
    return { dimension, attributeKey: null };
  }
  const key = attributeKey(input.attributeKey, f("attributeKey"));
  if (!targets.some((t) => t.attributeKey === key)) throw new ValidationError(f("attributeKey"), `${key} is not what the rule's buckets are keyed by: ${names}`);
  return { dimension: null, attributeKey: key };
}

function overrideIdentifier(value: unknown, match: OverrideMatch, target: OverrideTarget, field: string): string {
  const raw = text(value, field, LENGTHS.identifier);
  const ip = target.dimension === "IP";
  if (match === "CIDR") {
    if (!ip) throw new ValidationError(field, "can be a CIDR block only for IP");
    return cidrBlock(raw, field);
  }
  if (match === "GLOB") {
    if (ip) throw new ValidationError(field, "of IP is an address or, with match CIDR, a block: not a glob");
    if (!raw.includes("*")) throw new ValidationError(field, 'is a glob without "*": use match EXACT');
    return raw;
  }
  return ip ? ipAddress(raw, field)! : raw;
}

/** A block by its network address, canonical: "10.0.0.0/8", never "10.1.2.3/8", so that one block is one override. */
export function cidrBlock(raw: string, field: string): string {
  const slash = raw.indexOf("/");
  if (slash === -1) throw new ValidationError(field, 'must be a CIDR block such as "10.0.0.0/8"');
  const address = ipAddress(raw.slice(0, slash), field)!;
  const bits = ipBits(address);
  const prefix = raw.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits.length) {
    throw new ValidationError(field, `must end in a prefix length from 0 to ${bits.length} (got ${JSON.stringify(prefix)})`);
  }
  if (bits.slice(Number(prefix)).includes("1")) throw new ValidationError(field, `has address bits set past its /${prefix}: give the block's network address`);
  return `${address}/${prefix}`;
}

export function expiry(value: unknown, now: Date, field: string): Date | null {
  if (value === null || value === undefined) return null;
  const at = value instanceof Date ? value : typeof value === "string" ? new Date(value) : null;
  if (at === null || Number.isNaN(at.getTime())) throw new ValidationError(field, "must be a date and time (ISO 8601)");
  if (at.getTime() <= now.getTime()) throw new ValidationError(field, `must be in the future (got ${at.toISOString()})`);
  return at;
}

/** An address (canonical, as request.ts leaves it) as a string of 32 or 128 bits. */
export function ipBits(address: string): string {
  if (!address.includes(":")) return address.split(".").map((part) => Number(part).toString(2).padStart(8, "0")).join("");
  const [head, tail] = address.split("::") as [string, string | undefined];
  const groups = (s: string | undefined) => (s === undefined || s === "" ? [] : s.split(":"));
  const left = groups(head);
  const right = groups(tail);
  const all = tail === undefined ? left : [...left, ...new Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return all.map((group) => parseInt(group, 16).toString(2).padStart(16, "0")).join("");
}

/** The block of the first `prefix` bits of an address, as a map key: "v4:00001010" is 10.0.0.0/8. */
export function networkOf(bits: string, prefix: number): string {
  return `${bits.length === 32 ? "v4" : "v6"}:${bits.slice(0, prefix)}`;
}
