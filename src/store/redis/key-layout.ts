/**
 * Where a bucket lives in Redis. Buckets of one rule are spread over `pages`
 * page pairs by a hash of their key; every key of one bucket carries the same
 * hash tag, {rule id:page}, so a bucket never spans Redis Cluster slots while a
 * rule's buckets spread over all of them.
 *
 *   fg:{<rule id>:<page>}:a / :b        the page pair (hashes; field = bucket)
 *   fg:{<rule id>:<page>}:l:<field>     a SLIDING_WINDOW_LOG bucket's log (list)
 *   fg:{<rule id>:<page>}:c:<field>     a CONCURRENCY bucket's leases (sorted set: slot name, expiry in ms)
 *
 * The field is the bucket key itself when short, so that keys stay readable in
 * redis-cli; a longer key is replaced by its digest, keeping each page small
 * enough for Redis's compact listpack encoding (values up to 64 bytes).
 */

import { hash } from "node:crypto";
import calculateSlot from "cluster-key-slot";
import type { BucketRef } from "../../domain/ports.js";
import { fnv1a } from "../../domain/fnv1a.js";

const MAX_PLAIN_FIELD = 48;

export class KeyLayout {
  constructor(
    readonly prefix: string,
    readonly pages: number,
  ) {}

  field(key: string): string {
    return key.length <= MAX_PLAIN_FIELD ? key : `#${hash("sha256", key, "base64url").slice(0, 22)}`;
  }

  /** The keys a bucket's state may be in: the page pair, its log, its leases. */
  keysOf(ruleId: string, field: string): { pageA: string; pageB: string; log: string; leases: string } {
    const base = this.base(ruleId, field);
    return { pageA: `${base}:a`, pageB: `${base}:b`, log: `${base}:l:${field}`, leases: `${base}:c:${field}` };
  }

  /** The Redis Cluster slot every key of a bucket hashes to (by its hash tag). */
  slotOf(ruleId: string, field: string): number {
    return calculateSlot(this.keysOf(ruleId, field).pageA);
  }

  /** The keys decide.lua reads for a bucket, in its order. */
  scriptKeys(bucket: BucketRef, field: string): string[] {
    // Only the keys read: this runs for every bucket of every check.
    const base = this.base(bucket.ruleId, field);
    switch (bucket.params.algorithm) {
      case "SLIDING_WINDOW_LOG":
        return [`${base}:l:${field}`];
      case "CONCURRENCY":
        return [`${base}:c:${field}`];
      default:
        return [`${base}:a`, `${base}:b`];
    }
  }

  /** What every key of a bucket starts with: the prefix and the hash tag of its page. */
  private base(ruleId: string, field: string): string {
    return `${this.prefix}{${ruleId}:${fnv1a(field) % this.pages}}`;
  }
}
