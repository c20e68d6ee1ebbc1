/** The vocabulary of a rule: pure data, shared by every layer. */

import type { AttributeCondition } from "./attributes.js";
import type { Calendar } from "./calendar.js";

export const DIMENSIONS = ["TENANT", "USER", "IP", "API_KEY", "CLIENT", "ENDPOINT"] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export const ALGORITHMS = [
  "SLIDING_WINDOW_COUNTER",
  "TOKEN_BUCKET",
  "FIXED_WINDOW",
  "SLIDING_WINDOW_LOG",
  "LEAKY_BUCKET",
  "CONCURRENCY",
] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

export const ACTIONS = ["REJECT", "THROTTLE", "LOG_ONLY"] as const;
export type Action = (typeof ACTIONS)[number];

export const FAILURE_MODES = ["OPEN", "CLOSED", "LOCAL"] as const;
export type FailureMode = (typeof FAILURE_MODES)[number];

/** REGIONAL: each region enforces the limit on its own; GLOBAL: all regions share it (src/store/regions). */
export const REACHES = ["REGIONAL", "GLOBAL"] as const;
export type Reach = (typeof REACHES)[number];

export const WINDOW_UNITS = ["SECONDS", "MINUTES", "HOURS", "DAYS"] as const;
export type WindowUnit = (typeof WINDOW_UNITS)[number];

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/**
 * The methods of the rules that count a request of `method`: its own, and for
 * HEAD also GET's. Servers answer HEAD by running the GET handler and leaving
 * out the body (RFC 9110 §9.3.2; Express, Fastify and Hono all do), so a
 * GET limit that HEAD did not count could be walked around with HEAD
 * requests doing the same work.
 */
export function methodsCounting(method: HttpMethod): readonly HttpMethod[] {
  return method === "HEAD" ? HEAD_COUNTED_BY : METHOD_ALONE[method];
}

const HEAD_COUNTED_BY: readonly HttpMethod[] = ["HEAD", "GET"];
const METHOD_ALONE = Object.fromEntries(HTTP_METHODS.map((m) => [m, [m]])) as unknown as Record<HttpMethod, readonly HttpMethod[]>;

/** Whether a rule for `ruleMethod` (null: any) counts a request of `requestMethod` (null: it names none). */
export function ruleCountsMethod(ruleMethod: HttpMethod | null, requestMethod: HttpMethod | null): boolean {
  return ruleMethod === null || (requestMethod !== null && methodsCounting(requestMethod).includes(ruleMethod));
}

/** The tenant id of rules that apply to every tenant. */
export const ALL_TENANTS = "*";

const SECONDS_PER_UNIT: Record<WindowUnit, number> = {
  SECONDS: 1,
  MINUTES: 60,
  HOURS: 3600,
  DAYS: 86400,
};

export function windowSecondsOf(window: number, unit: WindowUnit): number {
  return window * SECONDS_PER_UNIT[unit];
}

/**
 * A rule's automatic ban (docs/bans.md): once one of its buckets has been
 * refused `refusals` times within `withinSeconds`, the bucket's identity (its
 * first USER, IP, API_KEY or CLIENT dimension) is banned for `banSeconds`.
 */
export interface AutoBan {
  refusals: number;
  withinSeconds: number;
  banSeconds: number;
}

/** The fields a caller chooses; everything a rule is, minus identity and bookkeeping. */
export interface RuleSpec {
  tenantId: string;
  name: string;
  scope: Dimension[];
  /** Attribute keys the buckets are keyed by too, after the scope's dimensions (see attributes.ts); sorted. */
  attributeKeys: string[];
  /** The attribute values a request must carry for the rule to apply; sorted by key. Empty: every request. */
  when: AttributeCondition[];
  resource: string | null;
  method: HttpMethod | null;
  algorithm: Algorithm;
  limit: number;
  window: number;
  windowUnit: WindowUnit;
  /** FIXED_WINDOW only: the window is this calendar period (see calendar.ts), and window and windowUnit are not used; null: window and windowUnit. */
  calendar: Calendar | null;
  burst: number | null;
  action: Action;
  failureMode: FailureMode;
  /** Whether each region has the limit (REGIONAL) or all regions share it (GLOBAL, src/store/regions). */
  reach: Reach;
  priority: number;
  enabled: boolean;
  /** Null: refusals ban nobody. */
  autoBan: AutoBan | null;
}

export interface Rule extends RuleSpec {
  id: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export const RULE_DEFAULTS = {
  scope: [] as Dimension[],
  attributeKeys: [] as string[],
  when: [] as AttributeCondition[],
  resource: null,
  method: null,
  algorithm: "SLIDING_WINDOW_COUNTER" as Algorithm,
  windowUnit: "SECONDS" as WindowUnit,
  calendar: null,
  burst: null,
  action: "REJECT" as Action,
  failureMode: "OPEN" as FailureMode,
  reach: "REGIONAL" as Reach,
  priority: 0,
  enabled: true,
  autoBan: null,
} satisfies Partial<RuleSpec>;

/**
 * A rule as an older version of the service wrote it (a snapshot file, a
 * rule change from an instance not yet upgraded, an old revision): the
 * fields added since at the values every rule had before them.
 */
export function withLaterFields<T extends Rule>(rule: T): T {
  return {
    ...rule,
    reach: rule.reach ?? "REGIONAL",
    attributeKeys: rule.attributeKeys ?? [],
    when: rule.when ?? [],
    calendar: rule.calendar ?? null,
    autoBan: rule.autoBan ?? null,
  };
}

/** The capacity of a bucket: `burst` where the algorithm has one, else `limit`. */
export function capacityOf(rule: Pick<RuleSpec, "algorithm" | "limit" | "burst">): number {
  return usesBurst(rule.algorithm) ? (rule.burst ?? rule.limit) : rule.limit;
}

export function usesBurst(algorithm: Algorithm): boolean {
  return algorithm === "TOKEN_BUCKET" || algorithm === "LEAKY_BUCKET";
}
