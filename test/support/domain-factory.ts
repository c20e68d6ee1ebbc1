/** Complete, valid domain objects for tests (rules, rule specs, check requests); every field can be overridden. */

import { NO_ATTRIBUTES } from "../../src/domain/attributes.js";
import type { CheckRequest } from "../../src/domain/request.js";
import type { Rule, RuleSpec } from "../../src/domain/rule.js";

/**
 * What the contract fills in for each optional field of a new rule. Written out
 * here rather than taken from the service's RULE_DEFAULTS, so that the tests
 * check the service against the contract instead of against itself.
 */
export const CONTRACT_RULE_DEFAULTS = {
  scope: [],
  attributeKeys: [],
  when: [],
  resource: null,
  method: null,
  algorithm: "SLIDING_WINDOW_COUNTER",
  windowUnit: "SECONDS",
  calendar: null,
  burst: null,
  action: "REJECT",
  failureMode: "OPEN",
  reach: "REGIONAL",
  priority: 0,
  enabled: true,
  autoBan: null,
} as const satisfies Omit<RuleSpec, "tenantId" | "name" | "limit" | "window">;

let sequence = 0;

/** A rule of tenant acme, 5 per 60 seconds, with a fresh id and name. */
export function makeRule(fields: Partial<Rule> = {}): Rule {
  sequence += 1;
  return {
    id: `rule-${sequence}`,
    tenantId: "acme",
    name: `rule ${sequence}`,
    ...CONTRACT_RULE_DEFAULTS,
    // Arrays of the rule's own, not the shared constant's.
    scope: [],
    attributeKeys: [],
    when: [],
    algorithm: "FIXED_WINDOW", // what the engine suites were written against
    limit: 5,
    window: 60,
    version: 1,
    createdAt: new Date("2024-01-01T00:00:00Z"),
    updatedAt: new Date("2024-01-01T00:00:00Z"),
    ...fields,
  };
}

/**
 * A rule spec in which no field holds its contract default, so that a test sees
 * every field written, stored and read back (or kept) for what it is.
 */
export function makeNonDefaultRuleSpec(fields: Partial<RuleSpec> = {}): RuleSpec {
  return {
    tenantId: "acme",
    name: "per-user",
    scope: ["USER", "IP"],
    attributeKeys: ["plan", "route_group"],
    when: [{ key: "region", values: ["eu", "us"] }],
    resource: "/api/**",
    method: "POST",
    algorithm: "TOKEN_BUCKET",
    limit: 100,
    window: 1,
    windowUnit: "MINUTES",
    // A calendar needs FIXED_WINDOW: rule-repository.test.ts writes one in its update.
    calendar: null,
    burst: 20,
    action: "LOG_ONLY",
    failureMode: "LOCAL",
    // GLOBAL needs a window algorithm: rule-repository.test.ts writes it in its update.
    reach: "REGIONAL",
    priority: -3,
    enabled: false,
    autoBan: { refusals: 5, withinSeconds: 60, banSeconds: 600 },
    ...fields,
  };
}

/** A request of tenant acme that carries nothing else, as parseCheckRequest leaves one. */
export function makeTenantOnlyCheckRequest(fields: Partial<CheckRequest> = {}): CheckRequest {
  return {
    tenantId: "acme",
    userId: null,
    ip: null,
    apiKey: null,
    userAgent: null,
    cookie: null,
    resource: null,
    method: null,
    cost: 1,
    dryRun: false,
    attributes: NO_ATTRIBUTES,
    ignorePathCase: false,
    ...fields,
  };
}

/** A request of tenant acme from user u1 to POST /api/orders. */
export function makeCheckRequest(fields: Partial<CheckRequest> = {}): CheckRequest {
  return makeTenantOnlyCheckRequest({ userId: "u1", resource: "/api/orders", method: "POST", ...fields });
}
