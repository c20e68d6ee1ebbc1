/**
 * envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, free of gRPC
 * itself (src/server/grpc-server.ts carries it): authenticate the bearer key
 * as GraphQL does (a CHECKER of the tenant suffices), read the request as
 * checks (descriptors.ts), decide them together in one atomic call within the
 * caller's budget, and answer as Envoy expects (rate-limit-response.ts).
 * Failures are the domain's errors; the transport maps them to status codes.
 */

import { parseCheckRequest } from "../../domain/request.js";
import type { ApiKeyService } from "../../engine/access/api-key-service.js";
import type { Limiter } from "../../engine/decision/limiter.js";
import { descriptorChecks, type RateLimitRequestMessage } from "./descriptors.js";
import { rateLimitResponse, type RateLimitResponseMessage } from "./rate-limit-response.js";

export interface RateLimitServiceOptions {
  limiter: Limiter;
  keys: ApiKeyService;
  /** GRPC_DOMAINS: the tenant each Envoy domain stands for. */
  domainTenants: ReadonlyMap<string, string>;
}

export class RateLimitService {
  constructor(private readonly options: RateLimitServiceOptions) {}

  /**
   * `authorization`: the call's "authorization" metadata ("Bearer <key>").
   * `deadlineAtMs`: when the caller stops waiting (its gRPC deadline), or
   * Infinity; the counter store is given until then, less what answering takes.
   */
  async shouldRateLimit(authorization: string | undefined, request: RateLimitRequestMessage, deadlineAtMs: number): Promise<RateLimitResponseMessage> {
    const principal = await this.options.keys.authenticate(authorization);
    const checks = descriptorChecks(request, this.options.domainTenants).map(({ check, attributes }, i) =>
      parseCheckRequest({ ...check, attributes }, `descriptors[${i}]`),
    );
    const budgetMs = Number.isFinite(deadlineAtMs) ? storeBudgetMs(deadlineAtMs - Date.now()) : undefined;
    return rateLimitResponse(await this.options.limiter.checkTogether(principal, checks, { budgetMs }));
  }
}

/**
 * What the store may take of the time the caller has left: the rest is kept
 * for deciding by failure mode, answering and the way back, and for timers
 * that fire late, a tenth of it and at least 2 ms (Envoy's default 20 ms
 * leaves the store 18).
 */
export function storeBudgetMs(remainingMs: number): number {
  return Math.floor(remainingMs - Math.max(2, remainingMs / 10));
}
