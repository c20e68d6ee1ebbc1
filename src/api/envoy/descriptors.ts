/**
 * An Envoy rate limit request read as Floodgate checks (docs/envoy.md has the
 * table and a worked example). The domain names the tenant (GRPC_DOMAINS may
 * say which); each descriptor becomes one check of that tenant, decided
 * together with the request's other descriptors. A descriptor's entries fill
 * the built-in dimensions when their key is one of BUILT_IN_ENTRIES
 * (remote_address is the caller's IP, as Envoy's remote_address action sends
 * it); every other entry (generic_key, header_match, a request header's
 * descriptor_key, masked_remote_address, destination_cluster …) is an
 * attribute of the same key and value, which rules key by and match on.
 *
 *   domain "edge", hits_addend 0, descriptors
 *     [remote_address=10.0.0.1]                      -> { tenantId: "edge", ip: "10.0.0.1", cost: 1 }
 *     [generic_key=search, plan=free, path=/api/q]   -> { tenantId: "edge", resource: "/api/q", cost: 1,
 *                                                         attributes: generic_key=search, plan=free }
 *
 * What cannot be honoured is refused whole, naming the field, before anything
 * is counted: a descriptor's own `limit` (Floodgate's rules set the limits),
 * descriptors whose hits differ (one request is one atomic call of one cost),
 * a key given twice in one descriptor. An entry with an empty value (a header
 * present but empty) is left out, as if the header were absent.
 */

import { attributeKey, attributeValue } from "../../domain/attributes.js";
import { ValidationError } from "../../domain/errors.js";
import type { CheckRequestInput } from "../../domain/request.js";
import { MAX_COST } from "../../domain/service-limits.js";

/** RateLimitRequest as @grpc/proto-loader decodes it (keepCase, longs and enums as strings, defaults on). */
export interface RateLimitRequestMessage {
  domain: string;
  descriptors: DescriptorMessage[];
  hits_addend: number;
}

export interface DescriptorMessage {
  entries: { key: string; value: string }[];
  limit: { requests_per_unit: number; unit: string } | null;
  hits_addend: { value: string } | null;
}

/** Descriptor keys that fill a built-in dimension rather than an attribute. */
export const BUILT_IN_ENTRIES = {
  remote_address: "ip",
  user_id: "userId",
  api_key: "apiKey",
  user_agent: "userAgent",
  path: "resource",
  method: "method",
} as const satisfies Record<string, keyof CheckRequestInput>;

/** Most descriptors one request may carry (Envoy sends one per matching rate limit action, a handful). */
export const MAX_DESCRIPTORS = 64;

/** Most entries one descriptor may carry: every built-in key once and as many attributes as a check may have, with room to spare. */
export const MAX_ENTRIES = 32;

export interface DescriptorAttribute {
  key: string;
  value: string;
}

/** One descriptor as a check: the built-in dimensions, and its other entries as attributes (`attributes: [{ key, value }]` of CheckLimitsInput). */
export interface DescriptorCheck {
  check: CheckRequestInput;
  attributes: DescriptorAttribute[];
}

export function descriptorChecks(request: RateLimitRequestMessage, domainTenants: ReadonlyMap<string, string>): DescriptorCheck[] {
  if (request.domain === "") throw new ValidationError("domain", "must not be empty");
  const tenantId = domainTenants.get(request.domain) ?? request.domain;
  const { descriptors } = request;
  if (descriptors.length === 0) throw new ValidationError("descriptors", "must hold at least one descriptor");
  if (descriptors.length > MAX_DESCRIPTORS) throw new ValidationError("descriptors", `must hold at most ${MAX_DESCRIPTORS} descriptors (got ${descriptors.length})`);
  const cost = requestCost(request);
  return descriptors.map((descriptor, i) => descriptorCheck(descriptor, `descriptors[${i}]`, tenantId, cost));
}

/** The hits every descriptor adds: the request's hits_addend (0 is 1), or the descriptors' own, which must then agree. */
function requestCost(request: RateLimitRequestMessage): number {
  const own = request.descriptors.map((d, i) => (d.hits_addend === null ? null : { field: `descriptors[${i}].hits_addend`, hits: hits(d.hits_addend.value) }));
  const given = own.filter((o) => o !== null);
  const cost = given[0]?.hits ?? hits(String(request.hits_addend));
  for (const [i, o] of own.entries()) {
    const descriptorCost = o?.hits ?? hits(String(request.hits_addend));
    if (descriptorCost !== cost) {
      throw new ValidationError(
        o?.field ?? `descriptors[${i}]`,
        `adds ${descriptorCost} hits where another descriptor adds ${cost}: the descriptors of one request are decided as one call of one cost`,
      );
    }
  }
  if (cost > MAX_COST) throw new ValidationError(given[0]?.field ?? "hits_addend", `must be at most ${MAX_COST} (got ${cost})`);
  return cost;
}

/** Envoy's hits: 0 (unset) counts as 1. */
function hits(value: string): number {
  const parsed = Number(value);
  return parsed === 0 ? 1 : parsed;
}

/** One descriptor's built-in dimensions and attributes. The built-in values are validated by parseCheckRequest, as GraphQL's are. */
function descriptorCheck(descriptor: DescriptorMessage, field: string, tenantId: string, cost: number): DescriptorCheck {
  if (descriptor.limit !== null) {
    throw new ValidationError(`${field}.limit`, "is not supported: a descriptor's own limit cannot replace Floodgate's rules; set the limit as a rule (docs/envoy.md)");
  }
  if (descriptor.entries.length === 0) throw new ValidationError(`${field}.entries`, "must hold at least one entry");
  if (descriptor.entries.length > MAX_ENTRIES) throw new ValidationError(`${field}.entries`, `must hold at most ${MAX_ENTRIES} entries (got ${descriptor.entries.length})`);
  const check: CheckRequestInput = { tenantId, cost };
  const attributes: DescriptorAttribute[] = [];
  const seen = new Set<string>();
  descriptor.entries.forEach(({ key, value }, j) => {
    if (key === "") throw new ValidationError(`${field}.entries[${j}].key`, "must not be empty");
    if (seen.has(key)) throw new ValidationError(`${field}.entries[${j}].key`, `names ${JSON.stringify(key.slice(0, 64))} a second time in this descriptor`);
    seen.add(key);
    // Envoy sends an empty value for a header that is present but empty: the entry says nothing, like an absent header.
    if (value === "") return;
    const builtIn = BUILT_IN_ENTRIES[key as keyof typeof BUILT_IN_ENTRIES];
    // Checked here too, so that a refusal names the entry Envoy sent rather than the attribute it became.
    if (builtIn === undefined) attributes.push({ key: attributeKey(key, `${field}.entries[${j}].key`), value: attributeValue(value, `${field}.entries[${j}].value`) });
    else check[builtIn] = value;
  });
  return { check, attributes };
}
