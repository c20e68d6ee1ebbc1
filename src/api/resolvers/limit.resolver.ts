import { Arg, Ctx, Query, Resolver } from "type-graphql";
import type { Decision } from "../../domain/decision.js";
import { ValidationError } from "../../domain/errors.js";
import { parseCheckRequest } from "../../domain/request.js";
import type { ApiContext } from "../context.js";
import { CheckLimitsInput, LimitDecisionType } from "../types/decision.type.js";

export const MAX_BATCH = 1000;

@Resolver()
export class LimitResolver {
  @Query(() => LimitDecisionType)
  checkLimits(@Arg("request", () => CheckLimitsInput) request: CheckLimitsInput, @Ctx() ctx: ApiContext): Promise<Decision> {
    return ctx.check([parseCheckRequest(request)]).then(([decision]) => decision!);
  }

  /** All checks are validated before any is counted: one bad request fails the batch and changes nothing. */
  @Query(() => [LimitDecisionType])
  checkLimitsBatch(@Arg("requests", () => [CheckLimitsInput]) requests: CheckLimitsInput[], @Ctx() ctx: ApiContext): Promise<Decision[]> {
    if (requests.length > MAX_BATCH) throw new ValidationError("requests", `must hold at most ${MAX_BATCH} checks (got ${requests.length})`);
    const parsed = requests.map((request, i) => parseCheckRequest(request, `requests[${i}]`));
    return ctx.check(parsed);
  }
}
