/**
 * The service's fixed limits on what a caller may send, in one place, each
 * with the reason for its number. Every one is refused with BAD_USER_INPUT
 * naming the field and the limit, so a caller meets them as errors, never
 * as a slow or failed service.
 *
 * Not here: limits an operator chooses are settings (src/config/settings.ts;
 * the rule quotas' defaults are below, since the domain applies them); a rule
 * pattern's bounds stay in glob.ts, beside the matching whose cost they hold
 * down; tuning no caller meets (cache sizes, retry delays) stays beside the
 * code it tunes.
 */

/** The longest value of each string a caller sends, in characters. */
export const LENGTHS = {
  /** Part of every bucket key and a label of every metric: any UUID or slug fits, and a key stays short. */
  tenantId: 128,
  /** A rule's or an API key's id (UUIDs, 36 characters): nothing longer can exist. */
  id: 128,
  /** A check's userId or apiKey: a userId is held in bucket keys (an apiKey only as its digest); an email address (254 at most) or any opaque id fits. */
  identifier: 256,
  /** A check's ip: an IPv6 address is at most 45 characters as text, and a zone id fits beside it. */
  ip: 64,
  /** A User-Agent header: a few hundred characters in practice; only hashed (into the CLIENT fingerprint). */
  userAgent: 1024,
  /** A cookie's value: 4096 bytes is the size RFC 6265 asks browsers to hold, so a real cookie always fits. */
  cookie: 4096,
  /** The path every rule's pattern is matched against: matching costs up to its length per rule (see glob.ts). */
  resource: 2048,
  /** A check's attribute key ("plan", "route_group"): a name, not data; part of the bucket key of every rule keyed by it. */
  attributeKey: 64,
  /** A check's attribute value: any plan, region, route group or customer id fits, as a userId does. */
  attributeValue: 256,
  /**
   * resetLimit's bucket key: every key a check can make fits, every dimension
   * and every attribute a rule may be keyed by at its longest, escapes and
   * labels included (about 3,000 for the dimensions, 8 x 839 for attributes).
   */
  bucketKey: 16384,
  /** A rule's name: shown in dashboards and events, where a sentence is plenty. */
  ruleName: 200,
  /** A calendar's IANA time zone name: the longest in use ("America/Argentina/ComodRivadavia") is 32. */
  timeZone: 64,
  /** An API key's name, as for a rule's. */
  apiKeyName: 200,
} as const;

/**
 * One check's weight, in units of its rules' limits: far above any weight a
 * request is given (bytes in KiB, tokens, rows), and with the largest limit
 * (RULE_BOUNDS.maxLimit) still 10^15, below the 2^52 the counters' arithmetic
 * is exact to (algorithms/integer.ts).
 */
export const MAX_COST = 1_000_000;

/**
 * Checks in one operation, in one checkLimitsBatch or all its fields
 * together (see api/operation-checks.ts). A batch is decided in one round
 * trip to the counter store, so its size bounds how long one caller holds a
 * Redis connection, and the deadline of the largest batch (app.ts).
 */
export const MAX_BATCH = 1000;

/**
 * Events a slow subscriber may fall behind by before its subscription ends
 * with SUBSCRIBER_TOO_SLOW: ample for a reader that keeps up (events are
 * coalesced per bucket and interval, see CoalescingEventBus), while what one
 * stalled reader can pin in memory stays bounded.
 */
export const SUBSCRIBER_BUFFER = 1000;

/**
 * Attributes a check may carry, and what a rule may say of them: a check's
 * attributes are held in memory and hashed into bucket keys, and a rule's
 * conditions are tested on every check its tenant sends, so both stay small.
 */
export const ATTRIBUTE_BOUNDS = {
  /** Attributes on one check: an Envoy descriptor rarely has more than a handful of entries. */
  perRequest: 16,
  /** Attribute keys one rule's buckets are keyed by (its bucket key grows with each). */
  keysPerRule: 8,
  /** Conditions of one rule's `when`. */
  conditionsPerRule: 8,
  /** Values one condition accepts: a list of plans or regions, not a directory. */
  valuesPerCondition: 100,
} as const;

/**
 * Brackets a GraphQL document may nest ({ selection sets and input objects,
 * [ lists, ( arguments), counted in its text before it is parsed: graphql-js
 * parses, validates and executes by recursion, and a document of some
 * thousands of nested inline fragments exhausts Node's stack in one of them
 * (a 500, or a field error, depending on where). Eight times MAX_QUERY_DEPTH's
 * highest setting (100) is room for any document a person or a tool writes
 * (the standard introspection query nests 15 selection sets).
 */
export const MAX_DOCUMENT_NESTING = 800;

/** What one rule may ask for. */
export const RULE_BOUNDS = {
  /** A billion per window: above any real limit, and far below where the counters' arithmetic stops being exact. */
  maxLimit: 1_000_000_000,
  /** A year, leap years included: the longest window a quota is written in. */
  maxWindowSeconds: 366 * 86400,
  /** One stored entry per admitted unit: beyond this, SLIDING_WINDOW_COUNTER is the right tool. */
  maxLogLimit: 100_000,
} as const;

/**
 * How many rules a tenant may have (tenant "*" too, whose rules every check
 * meets), and how large one import may be: each rule costs every check of its
 * tenant a bounded match (see glob.ts), and an import is written in one
 * transaction. Settings choose them (MAX_RULES_PER_TENANT, MAX_IMPORT_RULES,
 * MAX_IMPORT_BYTES); DEFAULT_RULE_LIMITS are their defaults.
 */
export interface RuleLimits {
  maxRulesPerTenant: number;
  maxImportRules: number;
  maxImportBytes: number;
}

/**
 * A thousand rules hold one check's matching to a thousand times one rule's
 * worst case (8,225 steps: test/engine/decision/rule-index.test.ts); a
 * megabyte of YAML holds a thousand rules several times over.
 */
export const DEFAULT_RULE_LIMITS: RuleLimits = { maxRulesPerTenant: 1000, maxImportRules: 1000, maxImportBytes: 1 << 20 };

/**
 * Access list entries one tenant (or "*") may hold, live or expired, both
 * lists together: every instance keeps them all in memory, and a check
 * tests a tenant's user-agent globs one by one (domain/access-list.ts), so a
 * tenant's lists must not grow without end. Ten thousand holds a blocklist
 * of abusive networks with room to spare; a larger feed belongs in the
 * network in front of Floodgate.
 */
export const MAX_LIST_ENTRIES_PER_TENANT = 10_000;
