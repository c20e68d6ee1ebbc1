import type { CheckRequest } from "../../src/domain/request.js";
import type { Rule } from "../../src/domain/rule.js";

let sequence = 0;

/** A complete, valid Rule; every field can be overridden. */
export function makeRule(fields: Partial<Rule> = {}): Rule {
  sequence += 1;
  return {
    id: `rule-${sequence}`,
    tenantId: "acme",
    name: `rule ${sequence}`,
    scope: [],
    resource: null,
    method: null,
    algorithm: "FIXED_WINDOW",
    limit: 5,
    window: 60,
    windowUnit: "SECONDS",
    burst: null,
    action: "REJECT",
    failureMode: "OPEN",
    priority: 0,
    enabled: true,
    version: 1,
    createdAt: new Date("2024-01-01T00:00:00Z"),
    updatedAt: new Date("2024-01-01T00:00:00Z"),
    ...fields,
  };
}

/** A checked request of tenant acme from user u1; every field can be overridden. */
export function makeCheckRequest(fields: Partial<CheckRequest> = {}): CheckRequest {
  return {
    tenantId: "acme",
    userId: "u1",
    ip: null,
    apiKey: null,
    userAgent: null,
    resource: "/api/orders",
    method: "POST",
    cost: 1,
    dryRun: false,
    ...fields,
  };
}
