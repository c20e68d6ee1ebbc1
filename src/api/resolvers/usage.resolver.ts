import { Arg, Ctx, Int, Query, Resolver } from "type-graphql";
import type { Health } from "../../domain/health.js";
import type { TopBucket, UsagePoint } from "../../engine/usage/usage-service.js";
import { IdArg, TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { HealthType, TopBucketType, UsagePointType } from "../types/usage.type.js";

@Resolver()
export class UsageResolver {
  @Query(() => [UsagePointType], {
    description: "The rule's allowed, refused and shadow-refused checks per step (seconds, a whole number of minutes; default 60) since `since` (default: an hour ago; at most 6 hours ago), oldest first. A key of a tenant counts only its tenant's requests.",
  })
  ruleUsage(
    @IdArg("ruleId") ruleId: string,
    @Arg("since", () => Date, { nullable: true }) since: Date | null | undefined,
    @Arg("step", () => Int, { nullable: true }) step: number | null | undefined,
    @Ctx() ctx: ApiContext,
  ): Promise<UsagePoint[]> {
    return ctx.services.usage.ruleUsage(ctx.principal, ruleId, since, step);
  }

  @Query(() => [TopBucketType], {
    description: "The buckets refused most since `since` (default: 5 minutes ago), most first, at most `limit` (default 10, at most 100). An ADMIN naming no tenant sees every tenant's.",
  })
  topBuckets(
    @TenantIdArg() tenantId: string | null,
    @Arg("since", () => Date, { nullable: true }) since: Date | null | undefined,
    @Arg("limit", () => Int, { nullable: true }) limit: number | null | undefined,
    @Ctx() ctx: ApiContext,
  ): Promise<TopBucket[]> {
    return ctx.services.usage.topBuckets(ctx.principal, tenantId, since, limit);
  }

  @Query(() => HealthType, { description: "Degraded decisions (breakers), where the rules come from, and how many instances are alive; any key may read it." })
  health(@Ctx() ctx: ApiContext): Promise<Health> {
    return ctx.services.health();
  }
}
