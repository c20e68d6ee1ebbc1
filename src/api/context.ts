/** Per-request scope: the caller, the services, and a DataLoader that sends all checks of one operation to the store together. */

import DataLoader from "dataloader";
import type { Principal } from "../domain/access.js";
import type { Decision } from "../domain/decision.js";
import type { EventBus } from "../domain/ports.js";
import type { CheckRequest } from "../domain/request.js";
import type { ApiKeyService } from "../engine/api-key-service.js";
import type { Limiter } from "../engine/limiter.js";
import type { MutationLimiter } from "../engine/mutation-limiter.js";
import type { RuleService } from "../engine/rule-service.js";

export interface Services {
  rules: RuleService;
  limiter: Limiter;
  keys: ApiKeyService;
  mutations: MutationLimiter;
  events: EventBus;
}

export interface ApiContext {
  services: Services;
  principal: Principal;
  /** The request's id (X-Request-Id), in every log line about it. */
  requestId: string;
  /** Every check of the operation (aliases, batches) in one round trip; never cached, since each check counts. */
  checks: DataLoader<CheckRequest, Decision>;
}

export function createContext(services: Services, principal: Principal, requestId: string): ApiContext {
  return {
    services,
    principal,
    requestId,
    checks: new DataLoader((requests) => services.limiter.check(principal, requests), { cache: false, maxBatchSize: 1000 }),
  };
}
