/**
 * Access lists: per tenant (or "*", every tenant), identifiers that are
 * always refused (DENY) or always let through (ALLOW), whatever the rules
 * say. An entry names one kind of identifier:
 *
 *   IP          an address or a CIDR block, IPv4 or IPv6 ("10.0.0.0/8",
 *               "2001:db8::/32"); an IPv4-mapped IPv6 request address
 *               ("::ffff:10.1.2.3") is the IPv4 address it maps
 *   USER        a userId, exactly
 *   API_KEY     an apiKey, kept only as its digest (as bucket keys keep it)
 *   USER_AGENT  a userAgent glob, "*" any run of characters, matched
 *               without regard to case ("*curl/*", "python-requests/*")
 *
 * Values are stored canonical, so that one identifier is one entry: an
 * address as request.ts spells it, a block by its network address (a block
 * with host bits set, "10.1.2.3/8", is refused rather than guessed at), a
 * user-agent glob in lower case, an API key as "sha256:<digest>".
 */

import { secretDigest } from "./bucket-key.js";
import { ValidationError } from "./errors.js";
import { cidrBlock, expiry } from "./override.js";
import { ALL_TENANTS } from "./rule.js";
import { ipAddress } from "./request.js";
import { LENGTHS } from "./service-limits.js";
import { oneOf, reference, text } from "./validation.js";

export const ACCESS_LISTS = ["DENY", "ALLOW"] as const;
export type AccessList = (typeof ACCESS_LISTS)[number];

export const LIST_ENTRY_KINDS = ["IP", "USER", "API_KEY", "USER_AGENT"] as const;
export type ListEntryKind = (typeof LIST_ENTRY_KINDS)[number];

/** The note an entry may carry: why it is there, for the next person. */
const MAX_NOTE_LENGTH = 500;
const API_KEY_DIGEST = /^sha256:[A-Za-z0-9_-]{22}$/;

export interface ListEntrySpec {
  tenantId: string;
  list: AccessList;
  kind: ListEntryKind;
  /** Canonical (see the header). */
  value: string;
  note: string | null;
  /** From then on the entry is as if it did not exist; null: until it is removed. */
  expiresAt: Date | null;
}

export interface ListEntry extends ListEntrySpec {
  id: string;
  createdAt: Date;
  /** The API key that added it ("bootstrap" for ADMIN_TOKEN). */
  createdBy: string;
}

export type ListEntryChangeKind = "ADDED" | "REMOVED";
export const LIST_ENTRY_CHANGE_KINDS: readonly ListEntryChangeKind[] = ["ADDED", "REMOVED"];

/** One entry added or removed, as kept in its tenant's list history and heard by every instance. */
export interface ListEntryChange {
  kind: ListEntryChangeKind;
  entry: ListEntry;
  at: Date;
  /** Who made the change: an API key's id; null when not known. */
  actor: string | null;
}

export interface ListEntryInput {
  tenantId?: unknown;
  list?: unknown;
  kind?: unknown;
  value?: unknown;
  note?: unknown;
  expiresAt?: unknown;
}

/** The entry an input asks for, canonical; each failure names its field under `field` ("input.value"). An expiry must be after `now`. */
export function validateListEntry(input: ListEntryInput, now: Date, field = "input"): ListEntrySpec {
  const tenantId = reference(text(input.tenantId, `${field}.tenantId`, LENGTHS.tenantId), `${field}.tenantId`, LENGTHS.tenantId);
  const list = oneOf(input.list, ACCESS_LISTS, `${field}.list`);
  const kind = oneOf(input.kind, LIST_ENTRY_KINDS, `${field}.kind`);
  const value = canonicalValue(kind, input.value, `${field}.value`);
  const note = input.note === null || input.note === undefined || input.note === "" ? null : text(input.note, `${field}.note`, MAX_NOTE_LENGTH);
  return { tenantId, list, kind, value, note, expiresAt: expiry(input.expiresAt, now, `${field}.expiresAt`) };
}

/** What makes an entry one (unique in storage): its tenant, list, kind and canonical value, none of which holds a control character. */
export function listEntryIdentity(entry: Pick<ListEntrySpec, "tenantId" | "list" | "kind" | "value">): string {
  return `${entry.tenantId}\n${entry.list}\n${entry.kind}\n${entry.value}`;
}

/** Whether the entry still applies at nowMs. */
export function isLive(entry: Pick<ListEntrySpec, "expiresAt">, nowMs: number): boolean {
  return entry.expiresAt === null || entry.expiresAt.getTime() > nowMs;
}

function canonicalValue(kind: ListEntryKind, value: unknown, field: string): string {
  switch (kind) {
    case "IP": {
      const raw = text(value, field, LENGTHS.ip + 4).trim();
      return raw.includes("/") ? cidrBlock(raw, field) : ipAddress(raw, field)!;
    }
    case "USER":
      return text(value, field, LENGTHS.identifier);
    case "API_KEY": {
      const raw = text(value, field, LENGTHS.identifier);
      return API_KEY_DIGEST.test(raw) ? raw : apiKeyEntryValue(raw);
    }
    case "USER_AGENT": {
      const glob = text(value, field, LENGTHS.userAgent).toLowerCase();
      if (/^\*+$/.test(glob)) throw new ValidationError(field, 'matches every user agent: list the tenant\'s traffic by its rules, not by "*"');
      return glob;
    }
  }
}

/** How an API_KEY entry names a key: never the key itself (entries are listed, exported and kept in history). */
export function apiKeyEntryValue(apiKey: string): string {
  return `sha256:${secretDigest(apiKey)}`;
}

/** In words, for refusals and admissions: names the kind of entry and its id, never a value of the tenant's traffic. */
export function describeEntry(entry: ListEntry): string {
  const words: Record<ListEntryKind, string> = { IP: "IP address", USER: "user", API_KEY: "API key", USER_AGENT: "user agent" };
  const whose = entry.tenantId === ALL_TENANTS ? "every tenant's" : "the tenant's";
  return `the request's ${words[entry.kind]} is on ${whose} ${entry.list.toLowerCase()} list (entry ${entry.id})`;
}
