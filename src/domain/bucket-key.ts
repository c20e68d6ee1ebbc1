/**
 * The one place a bucket's identity is built. A bucket is (rule id, key); the
 * key names the request's values for the rule's scope, e.g. "user:u42" or
 * "tenant:acme|ip:10.0.0.1", and is what RuleResult.key shows and resetLimit
 * takes.
 *
 * No two different requests can produce the same key by accident or by
 * design: dimensions appear in one fixed order, each labelled, and the two
 * characters with meaning ("|" between dimensions, "%" for escapes) are
 * percent-escaped inside values. Attributes a rule is keyed by follow the
 * dimensions, sorted by key, each labelled "attr.<key>:"; no dimension's
 * label starts with "attr.", and an attribute key cannot hold ":" or "|"
 * (attributes.ts), so "attr.plan:free" can only come from the attribute plan.
 * A rule of tenant "*" keys by tenant too (unless it has neither scope nor
 * attribute keys: then it is one global bucket), so tenants never share a
 * bucket through a global rule. API keys are secrets: their buckets are named
 * by a hash, never by the key itself.
 *
 * Worked example: scope [USER], attributeKeys [route_group, plan], a request
 * from user u1 with plan "pro" and route_group "a|b": "user:u1|attr.plan:pro|attr.route_group:a%7Cb".
 */

import { createHash } from "node:crypto";
import { foldPathCase } from "./glob.js";
import type { CheckRequest } from "./request.js";
import { ALL_TENANTS, DIMENSIONS, type Dimension, type HttpMethod } from "./rule.js";

/** The key of the single bucket of a rule with an empty scope. */
export const WHOLE_RULE_KEY = "*";

const LABELS: Record<Dimension, string> = {
  TENANT: "tenant",
  USER: "user",
  IP: "ip",
  API_KEY: "api_key",
  CLIENT: "client",
  ENDPOINT: "endpoint",
};

type ValueOf = (request: CheckRequest) => string | null;

const VALUES: Record<Dimension, ValueOf> = {
  TENANT: (r) => r.tenantId,
  USER: (r) => r.userId,
  IP: (r) => r.ip,
  API_KEY: (r) => (r.apiKey === null ? null : secretDigest(r.apiKey)),
  CLIENT: (r) => (r.ip === null && r.userAgent === null && r.apiKey === null && r.cookie === null ? null : clientFingerprint(r)),
  ENDPOINT: (r) => endpointOf(null, r),
};

/**
 * A request's endpoint as a rule for `ruleMethod` counts it: the rule's own
 * method when it names one, so that the HEAD requests a GET rule counts (see
 * methodsCounting) share their GET twins' buckets and overrides.
 */
/** Method and path; the path folded for a check that ignores letter case, so that its every spelling is one bucket. */
function endpointOf(ruleMethod: HttpMethod | null, r: CheckRequest): string | null {
  if (r.resource === null) return null;
  return `${ruleMethod ?? r.method ?? "ANY"} ${r.ignorePathCase ? foldPathCase(r.resource) : r.resource}`;
}

/** The values of a rule for `ruleMethod`, by dimension. */
function valuesFor(ruleMethod: HttpMethod | null): Record<Dimension, ValueOf> {
  return ruleMethod === null ? VALUES : { ...VALUES, ENDPOINT: (r) => endpointOf(ruleMethod, r) };
}

/** The request's value of one of a rule's targets (what an override names), unescaped, as a rule for `ruleMethod` counts it; null when it has none. */
export function targetValue(target: { dimension: Dimension | null; attributeKey: string | null }, request: CheckRequest, ruleMethod: HttpMethod | null = null): string | null {
  if (target.dimension === null) return request.attributes.get(target.attributeKey!) ?? null;
  return target.dimension === "ENDPOINT" ? endpointOf(ruleMethod, request) : VALUES[target.dimension](request);
}

/** Builds the bucket key of a request for one rule, or null when the request lacks a dimension the rule is keyed by. */
export type BucketKeyOf = (request: CheckRequest) => string | null;

/** The label of an attribute's part of a bucket key. */
export function attributeLabel(key: string): string {
  return `attr.${key}`;
}

export function compileBucketKey(rule: { tenantId: string; scope: readonly Dimension[]; attributeKeys: readonly string[]; method?: HttpMethod | null }): BucketKeyOf {
  const attributeKeys = [...rule.attributeKeys].sort();
  const keyed = rule.scope.length > 0 || attributeKeys.length > 0;
  const dimensions = DIMENSIONS.filter((d) => rule.scope.includes(d) || (d === "TENANT" && rule.tenantId === ALL_TENANTS && keyed));
  if (!keyed) return () => WHOLE_RULE_KEY;
  const values = valuesFor(rule.method ?? null);
  const parts: { label: string; value: ValueOf }[] = [
    ...dimensions.map((d) => ({ label: `${LABELS[d]}:`, value: values[d] })),
    ...attributeKeys.map((key) => ({ label: `${attributeLabel(key)}:`, value: (r: CheckRequest) => r.attributes.get(key) ?? null })),
  ];
  return (request) => {
    let key = "";
    for (const part of parts) {
      const value = part.value(request);
      if (value === null) return null;
      key += (key === "" ? "" : "|") + part.label + escapeValue(value);
    }
    return key;
  };
}

/**
 * A dimension's value in a bucket key, unescaped, as the request that made
 * the key had it (for API_KEY and CLIENT, the digest and the fingerprint);
 * null when the key is not keyed by it. The parts of a key are split on "|"
 * safely, since values hold it only escaped.
 */
export function dimensionValueOfKey(key: string, dimension: Dimension): string | null {
  const label = `${LABELS[dimension]}:`;
  const part = key.split("|").find((p) => p.startsWith(label));
  return part === undefined ? null : unescapeValue(part.slice(label.length));
}

/** One string naming a bucket, for maps. Rule ids never contain a newline, so the two parts cannot run into each other. */
export function bucketId(ruleId: string, key: string): string {
  return `${ruleId}\n${key}`;
}

/**
 * The fingerprint of a caller, as the design identifies a user: sha256 over
 * ip, user agent, API key and cookie, each length-prefixed. The cookie came
 * later, so it is hashed only when there is one: a request without a cookie
 * keeps the fingerprint, and so the CLIENT bucket, it had before.
 */
export function clientFingerprint(request: Pick<CheckRequest, "ip" | "userAgent" | "apiKey"> & { cookie?: string | null }): string {
  const hash = createHash("sha256");
  const parts = request.cookie == null ? [request.ip, request.userAgent, request.apiKey] : [request.ip, request.userAgent, request.apiKey, request.cookie];
  for (const part of parts) {
    const value = part ?? "";
    hash.update(`${value.length}:${value}`);
  }
  return hash.digest("base64url").slice(0, 22);
}

/** An API key as bucket keys and access lists hold it: never the secret itself. */
export function secretDigest(secret: string): string {
  return createHash("sha256").update(secret).digest("base64url").slice(0, 22);
}

function escapeValue(value: string): string {
  return /[%|]/.test(value) ? value.replace(/%/g, "%25").replace(/\|/g, "%7C") : value;
}

function unescapeValue(value: string): string {
  return value.includes("%") ? value.replace(/%7C|%25/g, (escape) => (escape === "%7C" ? "|" : "%")) : value;
}
