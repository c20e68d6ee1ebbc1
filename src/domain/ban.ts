/**
 * A ban: one value of one dimension of one tenant's requests refused outright
 * until a time (fail2ban's model), by an operator or by a rule's autoBan.
 *
 * A ban names a value as it appears in bucket keys, so that what a throttle
 * event or topBuckets shows can be banned as it is, and so that a secret never
 * reaches the ban table: USER and IP are the request's userId and ip (IPs in
 * their canonical spelling), API_KEY is the 22-character digest a bucket key
 * shows for the key (never the key itself), CLIENT the fingerprint
 * (bucket-key.ts clientFingerprint). A tenant has at most one ban per
 * dimension and value: banning it again replaces its end and note (and keeps
 * its id), which is what makes two instances banning at once one ban.
 */

import { targetValue } from "./bucket-key.js";
import { ValidationError } from "./errors.js";
import type { CheckRequest } from "./request.js";
import { ipAddress } from "./request.js";
import { ALL_TENANTS, type Dimension } from "./rule.js";
import { LENGTHS } from "./service-limits.js";
import { integer, oneOf, text } from "./validation.js";

export const BAN_DIMENSIONS = ["USER", "IP", "API_KEY", "CLIENT"] as const;
export type BanDimension = (typeof BAN_DIMENSIONS)[number];

/** The longest a ban may last: a year (a longer one is a deny list entry). */
export const MAX_BAN_SECONDS = 365 * 86_400;
/** How long a ban's note may be. */
const MAX_NOTE = 1024;

export interface BanSpec {
  tenantId: string;
  dimension: BanDimension;
  value: string;
  until: Date;
  note: string | null;
}

export interface Ban extends BanSpec {
  id: string;
  createdAt: Date;
  /** The API key that banned ("bootstrap" for ADMIN_TOKEN), or "autoBan:<rule id>". */
  createdBy: string;
}

export interface BanInput {
  tenantId: string;
  dimension: string;
  value: string;
  until?: Date | null;
  durationSeconds?: number | null;
  note?: string | null;
}

/** What a ban holds, validated: exactly one of until (in the future) and durationSeconds; every failure names its field. */
export function parseBanInput(input: BanInput, nowMs: number, field = "input"): BanSpec {
  const tenantId = text(input.tenantId, `${field}.tenantId`, LENGTHS.tenantId);
  if (tenantId === ALL_TENANTS) throw new ValidationError(`${field}.tenantId`, `cannot be "${ALL_TENANTS}": a ban refuses one tenant's requests`);
  const dimension = oneOf(input.dimension, BAN_DIMENSIONS, `${field}.dimension`);
  return { tenantId, dimension, value: banValue(dimension, input.value, `${field}.value`), until: banEnd(input, nowMs, field), note: note(input.note, `${field}.note`) };
}

function banValue(dimension: BanDimension, value: string, field: string): string {
  if (dimension === "IP") {
    const ip = ipAddress(value, field);
    if (ip === null) throw new ValidationError(field, "is required");
    return ip;
  }
  return text(value, field, LENGTHS.identifier);
}

function banEnd({ until, durationSeconds }: BanInput, nowMs: number, field: string): Date {
  const hasUntil = until !== null && until !== undefined;
  const hasDuration = durationSeconds !== null && durationSeconds !== undefined;
  if (hasUntil && hasDuration) throw new ValidationError(`${field}.until`, "and durationSeconds cannot both be given: give one");
  if (hasDuration) return new Date(nowMs + integer(durationSeconds, `${field}.durationSeconds`, 1, MAX_BAN_SECONDS) * 1000);
  if (!hasUntil) throw new ValidationError(`${field}.until`, "or durationSeconds is required");
  if (!(until instanceof Date) || Number.isNaN(until.getTime())) throw new ValidationError(`${field}.until`, "must be a date-time");
  if (until.getTime() <= nowMs) throw new ValidationError(`${field}.until`, `must be in the future (got ${until.toISOString()})`);
  if (until.getTime() > nowMs + MAX_BAN_SECONDS * 1000) throw new ValidationError(`${field}.until`, `must be at most ${MAX_BAN_SECONDS} seconds from now`);
  return until;
}

function note(value: string | null | undefined, field: string): string | null {
  if (value === null || value === undefined || value === "") return null;
  return text(value, field, MAX_NOTE);
}

/** The request's value of a ban dimension, as a ban names it; null when the request has none. */
export function banValueOf(dimension: BanDimension, request: CheckRequest): string | null {
  return targetValue({ dimension, attributeKey: null }, request);
}

/**
 * What a rule's autoBan bans: the first of its scope's dimensions a ban can
 * name, in BAN_DIMENSIONS' order (for a rule keyed by [USER, IP], the user;
 * the bucket's other dimensions are not banned with it); null for a scope
 * with none (TENANT, ENDPOINT, attributes only), which cannot carry autoBan.
 */
export function autoBanDimension(scope: readonly Dimension[]): BanDimension | null {
  return BAN_DIMENSIONS.find((dimension) => scope.includes(dimension)) ?? null;
}

/** A ban is live until its end, on every instance's clock: expiry needs no sweeper. */
export function isLive(ban: Pick<Ban, "until">, nowMs: number): boolean {
  return ban.until.getTime() > nowMs;
}

/** What a BANNED decision tells the caller: the dimension and the end, never the note (an operator's words). */
export function banMessage(ban: Pick<Ban, "dimension" | "until">): string {
  return `this request's ${ban.dimension} is banned until ${ban.until.toISOString()}`;
}
