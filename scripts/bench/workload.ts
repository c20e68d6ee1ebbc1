/**
 * What `npm run bench` asks: the three rules both servers enforce, the callers
 * that ask, and the request bodies each server is sent. Both servers see the
 * same callers in the same order.
 *
 * Limits are high enough that normal checks are always allowed (the bench
 * measures deciding, not refusing), except for the attack tenant, whose
 * per-user rule (10 per hour) the attacker is far over.
 */

import { randomUUID } from "node:crypto";
import type { HttpMethod, Rule } from "../../src/domain/rule.js";
import { validateNewRule, type RuleInput } from "../../src/domain/rule-validation.js";

export const LIMITS = {
  windowSeconds: 60,
  perUser: 1_000_000,
  perIp: 1_000_000,
  perEndpoint: 1_000_000_000,
} as const;

export const TENANT = "bench";
export const ATTACK_TENANT = "bench-attack";
const USERS = 10_000;
const IPS = 1_000;
const ENDPOINTS = ["orders", "users", "carts", "search", "payments", "invoices", "reports", "items", "reviews", "sessions"];

export interface Caller {
  userId: string;
  ip: string;
  method: HttpMethod;
  resource: string;
}

/** The i-th caller of the normal workload: 10,000 users behind 1,000 IPs over 10 endpoints. */
export function caller(i: number): Caller {
  const user = (i * 7919) % USERS;
  const ip = user % IPS;
  return {
    userId: `u${user}`,
    ip: `10.${(ip >> 8) & 255}.${ip & 255}.7`,
    method: "POST",
    resource: `/api/v1/${ENDPOINTS[i % ENDPOINTS.length]}`,
  };
}

/** The callers of a run, in the order every server and the client are sent them. */
export const CALLERS: readonly Caller[] = Array.from({ length: 20_000 }, (_, i) => caller(i));

/** One caller, always the same, already far over its per-user limit. */
export const ATTACKER: Caller = { userId: "mallory", ip: "10.255.0.1", method: "POST", resource: "/api/v1/orders" };

/** The three rules of a tenant, as Floodgate stores them. */
function tenantRules(tenantId: string, perUser: { limit: number; window: number; windowUnit: "MINUTES" | "HOURS" }): RuleInput[] {
  const common = { tenantId, resource: "/api/**", window: 1, windowUnit: "MINUTES" };
  return [
    { ...common, name: "per-user", scope: ["USER"], ...perUser },
    { ...common, name: "per-ip", scope: ["IP"], limit: LIMITS.perIp },
    { ...common, name: "per-endpoint", scope: ["ENDPOINT"], limit: LIMITS.perEndpoint },
  ];
}

const FILLER_METHODS: HttpMethod[] = ["GET", "PUT", "DELETE", "PATCH"];

/**
 * Rules that never apply to a bench request but sit where a careless index
 * would still look at them: other tenants (most), other resource prefixes of
 * the bench tenant, deeper paths under the bench's endpoints, and the bench's
 * own prefix with other methods.
 */
function fillerRule(i: number): RuleInput {
  const common = { name: `filler-${i}`, scope: ["USER"], limit: 100, window: 1, windowUnit: "MINUTES" };
  switch (i % 10) {
    case 0:
      return { ...common, tenantId: TENANT, resource: `/svc${i}/**` };
    case 1:
      return { ...common, tenantId: TENANT, resource: `/api/v1/orders/x${i}` };
    case 2:
      return { ...common, tenantId: TENANT, resource: "/api/**", method: FILLER_METHODS[Math.floor(i / 10) % FILLER_METHODS.length] };
    default:
      return { ...common, tenantId: `tenant-${i % 997}`, resource: i % 2 === 0 ? "/api/**" : null };
  }
}

/** Every rule of a rule set of `total` rules: the bench's and the attack tenant's three each, and fillers. */
export function ruleSet(total: number): Rule[] {
  const inputs = [
    ...tenantRules(TENANT, { limit: LIMITS.perUser, window: 1, windowUnit: "MINUTES" }),
    ...tenantRules(ATTACK_TENANT, { limit: 10, window: 1, windowUnit: "HOURS" }),
  ];
  for (let i = 0; inputs.length < total; i++) inputs.push(fillerRule(i));
  const at = new Date();
  return inputs.map((input) => ({ ...validateNewRule(input), id: randomUUID(), version: 1, createdAt: at, updatedAt: at }));
}

/**
 * `total` overrides of the bench tenant's per-user rule, as the database
 * holds them: one bench user in ten has an exact override (at the rule's own
 * limit, so that decisions stay those of the plain rows), the rest name other
 * users exactly and, one in twenty, by a glob anchored on its suffix. A
 * check so meets the exact map and the globs' anchors on every lookup.
 */
export function overridesOfPerUser(rules: readonly Rule[], total: number): OverrideRow[] {
  const rule = rules.find((r) => r.tenantId === TENANT && r.name === "per-user")!;
  const at = new Date();
  const row = (match: "EXACT" | "GLOB", identifier: string): OverrideRow => ({
    id: randomUUID(),
    ruleId: rule.id,
    tenantId: TENANT,
    target: "USER",
    match,
    identifier,
    limit: LIMITS.perUser,
    version: 1,
    createdAt: at,
    updatedAt: at,
  });
  return Array.from({ length: total }, (_, i) => {
    if (i < USERS / 10) return row("EXACT", `u${i * 10}`);
    return i % 20 === 0 ? row("GLOB", `*@customer-${i}.example`) : row("EXACT", `customer-${i}@example.com`);
  });
}

/** An override's row in rule_overrides (Prisma's createMany input). */
export interface OverrideRow {
  id: string;
  ruleId: string;
  tenantId: string;
  target: string;
  match: "EXACT" | "GLOB";
  identifier: string;
  limit: number;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What a gateway reads from a decision: the verdict, the wait, and the headers to send. */
const SELECTION = "allowed retryAfter headers { name value }";
const CHECK = `query Check($r: CheckLimitsInput!) { checkLimits(request: $r) { ${SELECTION} } }`;
const CHECK_BATCH = `query CheckBatch($r: [CheckLimitsInput!]!) { checkLimitsBatch(requests: $r) { ${SELECTION} } }`;

/** A caller's check as Floodgate's CheckLimitsInput (and the client's check) takes it. */
export function checkInput(tenantId: string, c: Caller): { tenantId: string } & Caller {
  return { tenantId, ...c };
}

export function floodgateBody(tenantId: string, c: Caller): string {
  return JSON.stringify({ query: CHECK, variables: { r: checkInput(tenantId, c) } });
}

export function floodgateBatchBody(callers: readonly Caller[]): string {
  return JSON.stringify({ query: CHECK_BATCH, variables: { r: callers.map((c) => checkInput(TENANT, c)) } });
}

export function baselineBody(c: Caller): string {
  return JSON.stringify(c);
}

/** The hot bucket's tenant: one rule, one bucket for every check (scripts/bench/hot-bucket.ts). */
export const HOT_BUCKET = { tenantId: "bench-hot" } as const;

export function hotBucketRule(limit: number, windowMs: number): Rule {
  const input: RuleInput = { tenantId: HOT_BUCKET.tenantId, name: "hot", scope: ["TENANT"], limit, window: windowMs / 1000, windowUnit: "SECONDS", algorithm: "FIXED_WINDOW" };
  const at = new Date();
  return { ...validateNewRule(input), id: randomUUID(), version: 1, createdAt: at, updatedAt: at };
}
