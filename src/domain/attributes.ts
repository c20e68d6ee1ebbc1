/**
 * A request's attributes: business facts the caller names ("plan" is "free",
 * "region" is "eu", "route_group" is "search"), which is what an Envoy
 * descriptor entry is. A rule can key its buckets by attribute keys
 * (attributeKeys, beside the built-in scope) and can apply only to requests
 * whose attributes take given values (when). A rule that names an attribute,
 * in either place, does not apply to a request that lacks it.
 *
 * Keys are short and drawn from letters, digits, "_", "-" and ".", so a key
 * can never contain the ":" and "|" that give a bucket key its structure
 * (see bucket-key.ts); values are any printable text, escaped there.
 */

import { ValidationError } from "./errors.js";
import { hasControlCharacters } from "./request.js";
import { ATTRIBUTE_BOUNDS, LENGTHS } from "./service-limits.js";

/** A request's attributes by key; read-only, and empty for most requests. */
export type Attributes = ReadonlyMap<string, string>;

export const NO_ATTRIBUTES: Attributes = new Map();

/** A rule's condition on one attribute: the request must carry the key with one of the values. */
export interface AttributeCondition {
  key: string;
  values: string[];
}

export interface AttributeInput {
  key?: unknown;
  value?: unknown;
}

const KEY_CHARACTERS = /^[A-Za-z0-9_.-]+$/;

/** A request's attributes checked and gathered; null, undefined and [] are none. */
export function parseAttributes(input: readonly AttributeInput[] | null | undefined, field: string): Attributes {
  if (input === null || input === undefined || input.length === 0) return NO_ATTRIBUTES;
  if (input.length > ATTRIBUTE_BOUNDS.perRequest) {
    throw new ValidationError(field, `must hold at most ${ATTRIBUTE_BOUNDS.perRequest} attributes (got ${input.length})`);
  }
  const attributes = new Map<string, string>();
  input.forEach((attribute, i) => {
    const key = attributeKey(attribute.key, `${field}[${i}].key`);
    if (attributes.has(key)) throw new ValidationError(`${field}[${i}].key`, `names ${JSON.stringify(key)} a second time`);
    attributes.set(key, attributeValue(attribute.value, `${field}[${i}].value`));
  });
  return attributes;
}

export function attributeKey(value: unknown, field: string): string {
  if (typeof value !== "string") throw new ValidationError(field, value === null || value === undefined ? "is required" : "must be a string");
  if (value.length === 0 || value.length > LENGTHS.attributeKey) {
    throw new ValidationError(field, `must be 1 to ${LENGTHS.attributeKey} characters (got ${value.length})`);
  }
  if (!KEY_CHARACTERS.test(value)) {
    throw new ValidationError(field, `must be letters, digits, "_", "-" and "." only (got ${JSON.stringify(value.slice(0, 40))})`);
  }
  return value;
}

export function attributeValue(value: unknown, field: string): string {
  if (typeof value !== "string") throw new ValidationError(field, value === null || value === undefined ? "is required" : "must be a string");
  if (value.length === 0) throw new ValidationError(field, "must not be empty (leave the attribute out instead)");
  if (value.length > LENGTHS.attributeValue) throw new ValidationError(field, `must be at most ${LENGTHS.attributeValue} characters (got ${value.length})`);
  if (hasControlCharacters(value)) throw new ValidationError(field, "must not contain control characters");
  return value;
}

/** Whether a request's attributes meet every condition (a rule with none applies to every request). */
export type AttributeTest = (attributes: Attributes) => boolean;

export function compileConditions(conditions: readonly AttributeCondition[]): AttributeTest | null {
  if (conditions.length === 0) return null;
  const compiled = conditions.map(({ key, values }) => ({ key, values: new Set(values) }));
  return (attributes) => compiled.every(({ key, values }) => {
    const value = attributes.get(key);
    return value !== undefined && values.has(value);
  });
}
