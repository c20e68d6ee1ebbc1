/** Per-request scope: the caller, the services, and the checks of one operation sent to the store together. */

import DataLoader from "dataloader";
import type { Principal } from "../domain/access.js";
import type { Decision } from "../domain/decision.js";
import type { EventBus } from "../domain/ports.js";
import type { CheckRequest } from "../domain/request.js";
import { MAX_BATCH } from "../domain/service-limits.js";
import type { ApiKeyService } from "../engine/access/api-key-service.js";
import type { AccessListService } from "../engine/access-lists/access-list-service.js";
import type { BanService } from "../engine/bans/ban-service.js";
import type { Limiter } from "../engine/decision/limiter.js";
import type { MutationLimiter } from "../engine/access/mutation-limiter.js";
import type { RuleService } from "../engine/rules/rule-service.js";
import type { UsageService } from "../engine/usage/usage-service.js";
import type { Health } from "../domain/health.js";

export interface Services {
  rules: RuleService;
  accessLists: AccessListService;
  limiter: Limiter;
  keys: ApiKeyService;
  bans: BanService;
  mutations: MutationLimiter;
  events: EventBus;
  usage: UsageService;
  /** The service's state as an operator should know it (the `health` query). */
  health: () => Promise<Health>;
}

export interface ApiContext {
  services: Services;
  principal: Principal;
  /** The request's id (X-Request-Id), in every log line about it. */
  requestId: string;
  /**
   * Decides checks. Every check of the operation (aliases, batches) is sent to
   * the store in one call, and authorized as one: a forbidden check refuses
   * them all before any is counted (the root fields are non-null, so a refused
   * one leaves the operation without data: none of it may have counted).
   */
  check(requests: readonly CheckRequest[]): Promise<Decision[]>;
  /**
   * Refuses every check of the operation not yet sent to the store, with
   * `error`: a check field refused for its input (a request the domain
   * refuses, an argument graphql refuses) leaves the operation without data,
   * its root fields being non-null, so none of its checks may count. The
   * fields read their input before the loader runs (after every root field
   * has started), so whichever field comes first, nothing is counted.
   */
  refuseChecks(error: unknown): void;
}

/**
 * Never cached (every check counts), and no bound on the fields gathered:
 * the operation's checks stay one batch, authorized together. A key is one
 * field's checks (a checkLimitsBatch's whole list), so that a batch of a
 * hundred is one load, not a hundred promises. The same object for every
 * request.
 */
const CHECK_LOADER_OPTIONS = { cache: false } as const;

export function createContext(services: Services, principal: Principal, requestId: string): ApiContext {
  // Apollo hands resolvers a shallow copy of the context: the refusal lives here, shared by every copy.
  let refused: { error: unknown } | null = null;
  const loader = new DataLoader<readonly CheckRequest[], Decision[]>((fields) => (refused === null ? checkFields(services.limiter, principal, fields) : Promise.reject(refused.error)), CHECK_LOADER_OPTIONS);
  return {
    services,
    principal,
    requestId,
    check: (requests) => loader.load(requests),
    refuseChecks: (error) => {
      refused ??= { error };
    },
  };
}

/**
 * Every field's checks decided in one call of the limiter, and handed back
 * field by field. An admitted operation makes at most MAX_BATCH checks
 * (operation-checks.ts), so none is split; what one call of the limiter is
 * handed stays bounded all the same, whatever a context is given.
 */
async function checkFields(limiter: Limiter, principal: Principal, fields: readonly (readonly CheckRequest[])[]): Promise<Decision[][]> {
  const requests = fields.length === 1 ? fields[0]! : ([] as CheckRequest[]).concat(...fields);
  const calls: Promise<Decision[]>[] = [];
  for (let from = 0; from < requests.length; from += MAX_BATCH) calls.push(limiter.check(principal, requests.slice(from, from + MAX_BATCH)));
  const decisions = ([] as Decision[]).concat(...(await Promise.all(calls)));
  let next = 0;
  return fields.map((field) => decisions.slice(next, (next += field.length)));
}
