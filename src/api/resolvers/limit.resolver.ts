import { Arg, Ctx, Mutation, Query, Resolver, UseMiddleware } from "type-graphql";
import type { Decision } from "../../domain/decision.js";
import { parseCheckRequest } from "../../domain/request.js";
import type { ApiContext } from "../context.js";
import { checksPerOperation } from "../operation-checks.js";
import { CheckLimitsInput, LimitDecisionType } from "../types/decision.type.js";

/** Both fields count against the operation's MAX_BATCH checks (operation-checks.ts) before their arguments are read. */
@Resolver()
export class LimitResolver {
  @Query(() => LimitDecisionType)
  @UseMiddleware(checksPerOperation)
  checkLimits(@Arg("request", () => CheckLimitsInput) request: CheckLimitsInput, @Ctx() ctx: ApiContext): Promise<Decision> {
    return ctx.check([parseCheckRequest(request)]).then(([decision]) => decision!);
  }

  /** All checks are validated before any is counted: one bad request fails the batch and changes nothing. */
  @Query(() => [LimitDecisionType])
  @UseMiddleware(checksPerOperation)
  checkLimitsBatch(@Arg("requests", () => [CheckLimitsInput]) requests: CheckLimitsInput[], @Ctx() ctx: ApiContext): Promise<Decision[]> {
    const parsed = requests.map((request, i) => parseCheckRequest(request, `requests[${i}]`));
    return ctx.check(parsed);
  }

  @Mutation(() => Boolean, {
    description:
      "Frees the slots a CONCURRENCY lease holds (LimitDecision.lease.id), when the request it admitted has ended. True when any slot was still held; false when none was (released already, expired, reset, or another tenant's lease): releasing twice is harmless. Not counted against the admin mutation limit: it ends a check.",
  })
  releaseLease(@Arg("id", () => String) id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.limiter.releaseLease(ctx.principal, id);
  }
}
