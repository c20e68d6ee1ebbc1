/**
 * A request to be checked, validated and normalised at the edge so that
 * everything past this point can trust it: bounded lengths (no unbounded key
 * ever reaches a counter store), canonical IPs and methods, a path without
 * its query string.
 */

import { isIP } from "node:net";
import { parseAttributes, type AttributeInput, type Attributes } from "./attributes.js";
import { ValidationError } from "./errors.js";
import { withoutQueryOrFragment } from "./glob.js";
import { ALL_TENANTS, HTTP_METHODS, type HttpMethod } from "./rule.js";
import { LENGTHS, MAX_COST } from "./service-limits.js";

export interface CheckRequestInput {
  tenantId: string;
  userId?: string | null;
  ip?: string | null;
  apiKey?: string | null;
  userAgent?: string | null;
  cookie?: string | null;
  resource?: string | null;
  method?: string | null;
  cost?: number | null;
  dryRun?: boolean | null;
  attributes?: readonly AttributeInput[] | null;
  ignorePathCase?: boolean | null;
}

export interface CheckRequest {
  tenantId: string;
  userId: string | null;
  ip: string | null;
  apiKey: string | null;
  userAgent: string | null;
  /** The caller's cookie (a session cookie's value, say): part of the CLIENT fingerprint only, never shown. */
  cookie: string | null;
  /** The path only, normalised (see normalizePath): query string and fragment removed. */
  resource: string | null;
  method: HttpMethod | null;
  cost: number;
  dryRun: boolean;
  /** The caller's business attributes ("plan" -> "free"), each key once; empty when it names none. */
  attributes: Attributes;
  /**
   * The app routes paths without regard to letter case (Express's default), so
   * "/API/Orders" is the route "/api/orders": a rule's glob then applies when
   * it matches the path as spelt or folded (foldPathCase on both), and an
   * ENDPOINT bucket is keyed by the folded path, so that it counts every
   * spelling once.
   */
  ignorePathCase: boolean;
}

export function parseCheckRequest(input: CheckRequestInput, field = "request"): CheckRequest {
  const tenantId = identifier(input.tenantId, `${field}.tenantId`, LENGTHS.tenantId);
  if (tenantId === null) throw new ValidationError(`${field}.tenantId`, "must not be empty");
  if (tenantId === ALL_TENANTS) throw new ValidationError(`${field}.tenantId`, `cannot be "${ALL_TENANTS}": a request comes from one tenant`);
  return {
    tenantId,
    userId: identifier(input.userId, `${field}.userId`, LENGTHS.identifier),
    ip: ipAddress(input.ip, `${field}.ip`),
    apiKey: identifier(input.apiKey, `${field}.apiKey`, LENGTHS.identifier),
    userAgent: identifier(input.userAgent, `${field}.userAgent`, LENGTHS.userAgent),
    cookie: identifier(input.cookie, `${field}.cookie`, LENGTHS.cookie),
    resource: resourcePath(input.resource, `${field}.resource`),
    method: httpMethod(input.method, `${field}.method`),
    cost: cost(input.cost, `${field}.cost`),
    dryRun: input.dryRun ?? false,
    attributes: parseAttributes(input.attributes, `${field}.attributes`),
    ignorePathCase: input.ignorePathCase ?? false,
  };
}

/** Null and "" both mean "not given"; anything else must be printable and bounded. */
function identifier(value: string | null | undefined, field: string, max: number): string | null {
  if (value === null || value === undefined || value === "") return null;
  if (value.length > max) throw new ValidationError(field, `must be at most ${max} characters (got ${value.length})`);
  if (hasControlCharacters(value)) throw new ValidationError(field, "must not contain control characters");
  return value;
}

export function ipAddress(value: string | null | undefined, field: string): string | null {
  const raw = identifier(value, field, LENGTHS.ip);
  if (raw === null) return null;
  const version = isIP(raw);
  if (version === 0) throw new ValidationError(field, `must be an IPv4 or IPv6 address (got ${JSON.stringify(raw.slice(0, 64))})`);
  return version === 4 ? raw : canonicalIPv6(raw);
}

/** One spelling per address, so "::FFFF:10.0.0.1", "::ffff:a00:1" and "10.0.0.1" share a bucket. */
function canonicalIPv6(address: string): string {
  const url = new URL(`http://[${address.replace(/%.*$/, "")}]/`);
  const host = url.hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped) {
    const high = parseInt(mapped[1]!, 16);
    const low = parseInt(mapped[2]!, 16);
    return [high >> 8, high & 255, low >> 8, low & 255].join(".");
  }
  return host;
}

function resourcePath(value: string | null | undefined, field: string): string | null {
  const raw = identifier(value, field, LENGTHS.resource);
  if (raw === null) return null;
  if (!raw.startsWith("/")) throw new ValidationError(field, `must be a path starting with "/" (got ${JSON.stringify(raw.slice(0, 40))})`);
  return normalizePath(withoutQueryOrFragment(raw));
}


/** What normalizePath would change in a path that starts with "/": an empty segment, a "." or ".." segment, a trailing slash. */
const NOT_CANONICAL = /\/\/|\/\.\.?(?:\/|$)|.\/$/;

/**
 * One spelling per path, so that "/api//v1/./orders/" cannot slip past a rule
 * on "/api/v1/*": empty and "." segments are dropped, ".." removes the segment
 * before it (never above the root), and there is no trailing slash.
 * Percent-escapes are left alone: decoding "%2F" would invent a segment.
 */
export function normalizePath(path: string): string {
  // Most paths are canonical already: one test instead of a split and a join on every check.
  if (!NOT_CANONICAL.test(path)) return path;
  const segments: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join("/")}`;
}

export function httpMethod(value: string | null | undefined, field: string): HttpMethod | null {
  if (value === null || value === undefined || value === "") return null;
  const upper = value.toUpperCase();
  if (!(HTTP_METHODS as readonly string[]).includes(upper)) {
    throw new ValidationError(field, `must be one of ${HTTP_METHODS.join(", ")} (got ${JSON.stringify(value.slice(0, 20))})`);
  }
  return upper as HttpMethod;
}

function cost(value: number | null | undefined, field: string): number {
  if (value === null || value === undefined) return 1;
  if (!Number.isInteger(value) || value < 1 || value > MAX_COST) {
    throw new ValidationError(field, `must be an integer from 1 to ${MAX_COST} (got ${value})`);
  }
  return value;
}

/**
 * Characters no identifier or name may carry: C0 and C1 controls, line and
 * paragraph separators, bidirectional overrides and isolates (they make text
 * display as something else), and unpaired surrogates (which cannot be encoded
 * and would collide once stored).
 */
export function hasControlCharacters(value: string): boolean {
  return /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(value) || !value.isWellFormed();
}
