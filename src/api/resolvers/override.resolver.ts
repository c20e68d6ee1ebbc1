import { Arg, Ctx, Int, Mutation, Query, Resolver } from "type-graphql";
import type { Override } from "../../domain/override.js";
import { IdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { OverridePageType, OverrideType, SetOverrideInput } from "../types/override.type.js";

@Resolver(() => OverrideType)
export class OverrideResolver {
  @Mutation(() => OverrideType, { description: "Sets an override of a rule, replacing the rule's override of the same target, match and identifier; a new version of the rule." })
  setOverride(@Arg("input", () => SetOverrideInput) input: SetOverrideInput, @Ctx() ctx: ApiContext): Promise<Override> {
    return ctx.services.rules.setOverride(ctx.principal, { ...input });
  }

  @Mutation(() => Boolean)
  deleteOverride(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.rules.deleteOverride(ctx.principal, id);
  }

  @Query(() => OverridePageType, { description: "A rule's overrides by id, expired ones included, `first` at a time (at most 1000)." })
  overrides(
    @IdArg("ruleId") ruleId: string,
    @Arg("first", () => Int, { defaultValue: 100 }) first: number,
    @Arg("after", () => String, { nullable: true }) after: string | null | undefined,
    @Ctx() ctx: ApiContext,
  ): Promise<OverridePageType> {
    return ctx.services.rules.overrides(ctx.principal, ruleId, first, after ?? null).then(({ items, hasMore }) => ({
      items,
      endCursor: hasMore ? items[items.length - 1]!.id : null,
      hasNextPage: hasMore,
    }));
  }
}
