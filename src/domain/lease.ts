/**
 * Leases of CONCURRENCY rules (algorithms/concurrency.ts). A check admitted
 * by such rules holds one slot in each of their buckets, under one holder id
 * the instance draws for the check; the decision hands the caller the lease
 * as an opaque id, which releaseLease takes back to free the slots.
 *
 * The id carries everything a release needs, so that any instance can
 * release a lease another instance granted, without a table of leases: the
 * tenant it was granted in, the holder, and the buckets (rule id and key).
 * It is base64url of JSON, not a secret and not signed; what protects a
 * tenant's leases is that the slot a store keeps is named by tenant and
 * holder together (memberOf): a release names the tenant of the key that
 * asks, a key may only release in tenants it may check, and an id whose
 * tenant was rewritten names a slot that does not exist. The holder is a
 * random UUID, so no one releases a lease they were not given.
 *
 * Worked example: tenant acme's check admitted by rule r1 on bucket
 * "user:u1" holds member "<holder>:acme" in that bucket's set; the id is
 * base64url('["acme","<holder>",[["r1","user:u1"]]]').
 */

import { ValidationError } from "./errors.js";

/** One bucket a lease holds a slot in. */
export interface LeasedBucket {
  ruleId: string;
  key: string;
}

export interface LeaseClaim {
  tenantId: string;
  /** The check's random id (a UUID). */
  holder: string;
  buckets: LeasedBucket[];
}

/** A lease as the decision reports it. */
export interface Lease {
  id: string;
  /** When the first of its slots frees itself if it is never released: the shortest window of its rules after the decision. */
  expiresAt: Date;
}

/** The longest lease id accepted: far more than any check's buckets need, little enough to parse without care. */
export const MAX_LEASE_ID_LENGTH = 16_384;

/** A UUID as crypto.randomUUID writes it. */
const HOLDER = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The name of a lease's slot in each of its buckets. A holder is a UUID, 36 characters, so no other tenant and holder make the same name. */
export function memberOf(tenantId: string, holder: string): string {
  return `${holder}:${tenantId}`;
}

export function encodeLease(claim: LeaseClaim): string {
  const json = JSON.stringify([claim.tenantId, claim.holder, claim.buckets.map((b) => [b.ruleId, b.key])]);
  return Buffer.from(json, "utf8").toString("base64url");
}

/** The claim an id carries; a ValidationError on `field` when it is not an id this service issues. */
export function decodeLease(id: string, field: string): LeaseClaim {
  const invalid = () => new ValidationError(field, "is not a lease id: pass LimitDecision.lease.id as it was given");
  if (id.length === 0 || id.length > MAX_LEASE_ID_LENGTH || !/^[A-Za-z0-9_-]+$/.test(id)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(id, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length !== 3) throw invalid();
  const [tenantId, holder, buckets] = parsed as unknown[];
  // A holder of any other form could make the name of another tenant's slot (memberOf).
  if (typeof tenantId !== "string" || typeof holder !== "string" || !HOLDER.test(holder) || !Array.isArray(buckets) || buckets.length === 0) throw invalid();
  const leased = buckets.map((bucket: unknown): LeasedBucket => {
    if (!Array.isArray(bucket) || bucket.length !== 2 || typeof bucket[0] !== "string" || typeof bucket[1] !== "string") throw invalid();
    return { ruleId: bucket[0], key: bucket[1] };
  });
  return { tenantId, holder, buckets: leased };
}
