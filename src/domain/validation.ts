/** Field validators shared by every input the domain checks; each failure names the field. */

import { ValidationError } from "./errors.js";
import { hasControlCharacters } from "./request.js";

export function text(value: unknown, field: string, max: number): string {
  if (typeof value !== "string") throw new ValidationError(field, value === null || value === undefined ? "is required" : "must be a string");
  if (value.trim().length === 0) throw new ValidationError(field, "must not be empty");
  if (value.length > max) throw new ValidationError(field, `must be at most ${max} characters (got ${value.length})`);
  if (hasControlCharacters(value)) throw new ValidationError(field, "must not contain control characters");
  return value;
}

/**
 * A reference to something stored (a rule or key id, a tenant) as a caller
 * names it: printable and bounded before it is looked up, so that a NUL byte
 * or a megabyte never reaches a database as a query parameter. Whether it
 * names anything is for the lookup to answer (NOT_FOUND), not this check.
 */
export function reference(value: string, field: string, max: number): string {
  if (value.length > max) throw new ValidationError(field, `must be at most ${max} characters (got ${value.length})`);
  if (hasControlCharacters(value)) throw new ValidationError(field, "must not contain control characters");
  return value;
}

export function integer(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    const got = typeof value === "number" ? String(value) : JSON.stringify(value);
    throw new ValidationError(field, value === null || value === undefined ? "is required" : `must be an integer (got ${got})`);
  }
  if (value < min) throw new ValidationError(field, `must be at least ${min} (got ${value})`);
  if (value > max) throw new ValidationError(field, `must be at most ${max} (got ${value})`);
  return value;
}

export function bool(value: unknown, field: string): boolean {
  if (typeof value !== "boolean") throw new ValidationError(field, "must be true or false");
  return value;
}

export function oneOf<T extends string>(value: unknown, allowed: readonly T[], field: string): T {
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new ValidationError(field, `must be one of ${allowed.join(", ")} (got ${JSON.stringify(value)})`);
  }
  return value as T;
}
