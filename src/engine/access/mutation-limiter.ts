/**
 * Floodgate limits its own admin API with its own engine: every API key may
 * make `perMinute` rule or key changes a minute, counted by a built-in rule
 * (never stored, never listed) in the same counter store as everything else,
 * so the limit holds across the fleet. If the counter store is down the rule
 * fails open: an outage never locks the operators out.
 *
 * Its decisions publish no events. The built-in rule's tenant is a name like
 * any other, so its throttle events on the public bus would reach every
 * subscriber of a tenant that happens to bear that name, telling them which
 * API keys of other tenants hit the admin limit and when.
 */

import { NO_ATTRIBUTES } from "../../domain/attributes.js";
import { BOOTSTRAP } from "./api-key-service.js";
import type { Principal } from "../../domain/access.js";
import { RateLimitedError } from "../../domain/errors.js";
import type { Clock, CounterStore } from "../../domain/ports.js";
import type { Rule } from "../../domain/rule.js";
import { Limiter } from "../decision/limiter.js";
import { RuleBook } from "../decision/rule-book.js";

const ADMIN_TENANT = "floodgate";

export class MutationLimiter {
  private readonly limiter: Limiter;

  constructor(store: CounterStore, clock: Clock, perMinute: number) {
    const book = new RuleBook();
    book.load([builtInRule(perMinute, new Date(clock.now()))]);
    this.limiter = new Limiter(book, store, null, clock);
  }

  /** Counts `changes` mutations for the caller; throws TOO_MANY_REQUESTS when over its limit (nothing is counted then). */
  async admit(principal: Principal, changes: number): Promise<void> {
    const [decision] = await this.limiter.check(BOOTSTRAP, [
      {
        tenantId: ADMIN_TENANT,
        userId: null,
        ip: null,
        apiKey: principal.keyId,
        userAgent: null,
        cookie: null,
        resource: null,
        method: null,
        cost: changes,
        dryRun: false,
        attributes: NO_ATTRIBUTES,
        ignorePathCase: false,
      },
    ]);
    if (!decision!.allowed) {
      throw new RateLimitedError(`too many changes by this API key: try again in ${decision!.retryAfter} s`, decision!.retryAfter ?? 1);
    }
  }
}

function builtInRule(perMinute: number, at: Date): Rule {
  return {
    id: "floodgate-admin-mutations",
    tenantId: ADMIN_TENANT,
    name: "admin mutations per API key",
    scope: ["API_KEY"],
    attributeKeys: [],
    when: [],
    resource: null,
    method: null,
    algorithm: "SLIDING_WINDOW_COUNTER",
    limit: perMinute,
    window: 1,
    windowUnit: "MINUTES",
    calendar: null,
    burst: null,
    action: "REJECT",
    failureMode: "OPEN",
    reach: "REGIONAL",
    priority: 0,
    enabled: true,
    autoBan: null,
    version: 1,
    createdAt: at,
    updatedAt: at,
  };
}
