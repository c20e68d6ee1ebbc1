/**
 * The HTTP headers a backend sends with its response as they are:
 *   X-RateLimit-Limit / -Remaining / -Reset (unix seconds) from the deciding
 *   rule, and Retry-After on a refusal;
 * and the fields of draft-ietf-httpapi-ratelimit-headers (revision 12), each
 * a structured-field List (RFC 9651) with one Item per enforcing rule:
 *   RateLimit-Policy: "per-user";q=5;w=60;pk=:…:, "per-ip";q=100;w=60;pk=:…:
 *   RateLimit: "per-user";r=0;t=42;pk=:…:, "per-ip";r=95;t=3;pk=:…:
 * LOG_ONLY rules never show: shadow mode is invisible to clients.
 *
 * What each parameter means here (docs/rate-limit-headers.md has the whole account):
 *   q  the rule's limit, the quota per window w (in seconds). A token or
 *      leaky bucket also says its capacity, fg-burst (vendor-prefixed, as the
 *      draft asks of parameters of one's own): r may be up to it.
 *   qu omitted: the draft's default unit, requests. A check of cost c counts
 *      as c of them, in q, r and X-RateLimit-* alike.
 *   pk the partition: the first 12 bytes of SHA-256 of the bucket's key
 *      (RuleResult.key), the same in both fields, so a client tells its
 *      buckets apart without the key being shown.
 *   r  what the bucket has left, as its counter was read.
 *   t  seconds until more quota is available: for a rule refusing the
 *      request, until a request of its cost would be admitted (its
 *      retryAfter, so Retry-After, the longest of those, is never earlier
 *      than any refusing rule's t); for a rule admitting it, until it has a
 *      unit more (moreQuotaInMs); absent when its bucket is whole.
 * RateLimit-Policy is the same for every response of a client's sequence: it
 * names every enforcing rule that applies, in the rule book's order, whatever
 * path decided (counter store, over-limit cache, failure mode). RateLimit
 * holds an Item only for a rule whose bucket was read (never a number made
 * up for one that was not), most restrictive first, and is left out when
 * there is none.
 */

import { hash } from "node:crypto";
import type { LimitParams } from "../../domain/algorithms/index.js";
import type { HttpHeader, RuleResult } from "../../domain/decision.js";
import { GenerationalCache } from "../../domain/generational-cache.js";
import type { CompiledRule } from "./compiled-rule.js";

/** One rule's service limit: what its bucket has left and when more is available, as read. */
export interface ServiceLimit {
  compiled: CompiledRule;
  key: string;
  remaining: number;
  /** Whole seconds; null: nothing more to make available (the bucket is whole). */
  resetSeconds: number | null;
}

export interface HeaderInput {
  allowed: boolean;
  retryAfter: number | null;
  /** The X-RateLimit-* fields' rule: the most restrictive enforcing result that was read; null: none (no headers at all). */
  deciding: RuleResult | null;
  /** Every enforcing rule that applies, in the rule book's order: its bucket's key and RateLimit-Policy item (an override's, where one applies). */
  policies: readonly { policyItem: string; key: string }[];
  /** The service limits of the enforcing rules whose buckets were read, most restrictive first: one RateLimit item each. */
  limits: readonly ServiceLimit[];
}

export function rateLimitHeaders({ allowed, retryAfter, deciding, policies, limits }: HeaderInput): HttpHeader[] {
  if (deciding === null) return [];
  const headers: HttpHeader[] = [
    { name: "X-RateLimit-Limit", value: String(deciding.limit) },
    { name: "X-RateLimit-Remaining", value: String(deciding.remaining) },
    { name: "X-RateLimit-Reset", value: String(Math.ceil(deciding.resetAt.getTime() / 1000)) },
  ];
  if (!allowed && retryAfter !== null) headers.push({ name: "Retry-After", value: String(retryAfter) });
  // Both fields name the same buckets: each key is looked up once. The lists are built by concatenation, in
  // loops: map and join took three times as long, on a path of every check.
  const partitions: string[] = [];
  let policy = "";
  for (let i = 0; i < policies.length; i++) {
    const { key, policyItem } = policies[i]!;
    partitions.push(partitionKey(key));
    policy += `${i === 0 ? "" : ", "}${policyItem};pk=${partitions[i]}`;
  }
  if (policies.length > 0) headers.push({ name: "RateLimit-Policy", value: policy });
  let limit = "";
  for (let i = 0; i < limits.length; i++) {
    const { compiled, key, remaining, resetSeconds } = limits[i]!;
    limit += `${i === 0 ? "" : ", "}${compiled.policyName};r=${remaining}${resetSeconds === null ? "" : `;t=${resetSeconds}`};pk=${partitionOf(key, policies, partitions)}`;
  }
  if (limits.length > 0) headers.push({ name: "RateLimit", value: limit });
  return headers;
}

/** A bucket's partition key, as already looked up for RateLimit-Policy where that names the bucket. */
function partitionOf(key: string, policies: HeaderInput["policies"], partitions: readonly string[]): string {
  for (let i = 0; i < policies.length; i++) if (policies[i]!.key === key) return partitions[i]!;
  return partitionKey(key);
}

/**
 * The partition keys of the buckets named lately. A key's is the same every
 * time, and a bucket is named again and again (by both fields of a response,
 * and by every check of its caller): hashing it each time was about a
 * twelfth of a check's CPU in the server under the client's load. 32,768
 * keys hold the buckets of the last few seconds of a busy instance, within
 * 8 MiB however long a caller makes its keys (a path, attributes: up to
 * LENGTHS.bucketKey characters); one forgotten is hashed again. Generations,
 * not an LRU: three lookups a check, and an LRU's hit relinks its entry,
 * writing to it and to its neighbours (in CPU profiles of a batch's server,
 * LruCache.get took 5.3% of the busy time for these lookups, this cache's
 * 4.6%; what is left is finding the key among tens of thousands).
 */
const partitionKeys = new GenerationalCache<string, string>({
  maxEntries: 32_768,
  maxWeight: 8 * 1024 * 1024,
  // Two bytes a character for both texts (V8 keeps a text one byte a character only while it can), and the entry's own.
  weigh: (key, partition) => 2 * (key.length + partition.length) + 200,
});

/** An sf-binary (RFC 9651 §3.3.5) naming the bucket's partition without showing its key. */
export function partitionKey(key: string): string {
  let known = partitionKeys.get(key);
  if (known === undefined) {
    // crypto.hash, one call, costs about a third of a createHash chain on this hot path.
    known = `:${hash("sha256", key, "buffer").subarray(0, 12).toString("base64")}:`;
    partitionKeys.set(key, known);
  }
  return known;
}

/**
 * How long until a bucket with `remaining` left has one unit more, from how
 * long until it is whole (`resetInMs`). A token or leaky bucket drains its
 * debt evenly, one unit every window ÷ limit, so the next unit comes the
 * other missing units' drain before it is whole (never earlier than it does:
 * at most 1 ms late). A fixed window gives everything back when it ends,
 * which is when it is whole. A sliding window gives units back as old ones
 * age out, which the reply does not say: its reset, when the last one has,
 * is the bound given.
 */
export function moreQuotaInMs({ algorithm, limit, windowMs, capacity }: LimitParams, remaining: number, resetInMs: number): number {
  if (algorithm !== "TOKEN_BUCKET" && algorithm !== "LEAKY_BUCKET") return resetInMs;
  const missingAfterNext = Math.max(0, capacity - remaining - 1);
  return resetInMs - Math.floor((missingAfterNext * windowMs) / limit);
}

/** Whole seconds until `atMs`, rounded up, never negative: both times from one clock. */
export function secondsUntil(atMs: number, nowMs: number): number {
  return Math.max(0, Math.ceil((atMs - nowMs) / 1000));
}
