/** Per-request scope: the services, and a DataLoader that sends all checks of one operation to the store together. */

import DataLoader from "dataloader";
import type { Decision } from "../domain/decision.js";
import type { EventBus } from "../domain/ports.js";
import type { CheckRequest } from "../domain/request.js";
import type { Limiter } from "../engine/limiter.js";
import type { RuleService } from "../engine/rule-service.js";

export interface Services {
  rules: RuleService;
  limiter: Limiter;
  events: EventBus;
}

export interface ApiContext {
  services: Services;
  /** Who is calling, recorded in rule history; null until callers authenticate with API keys. */
  actor: string | null;
  /** Every check of the operation (aliases, batches) in one round trip; never cached, since each check counts. */
  checks: DataLoader<CheckRequest, Decision>;
}

export function createContext(services: Services): ApiContext {
  return {
    services,
    actor: null,
    checks: new DataLoader((requests) => services.limiter.check(requests), { cache: false, maxBatchSize: 1000 }),
  };
}
