import { Arg, Ctx, FieldResolver, Int, Mutation, Query, Resolver, Root } from "type-graphql";
import type { RuleRevision } from "../../domain/revision.js";
import { windowSecondsOf, type Action, type Rule } from "../../domain/rule.js";
import { IdArg, TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { ActionEnum } from "../types/enums.js";
import { RuleRevisionType } from "../types/revision.type.js";
import { CreateRuleInput, UpdateRuleInput } from "../types/rule.input.js";
import { RuleType } from "../types/rule.type.js";

@Resolver(() => RuleType)
export class RuleResolver {
  @Query(() => RuleType, { nullable: true })
  rule(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Rule | null {
    return ctx.services.rules.get(ctx.principal, id);
  }

  @Query(() => [RuleType])
  rules(@TenantIdArg() tenantId: string | null, @Ctx() ctx: ApiContext): Rule[] {
    return ctx.services.rules.list(ctx.principal, tenantId);
  }

  @Mutation(() => RuleType)
  createRule(@Arg("input", () => CreateRuleInput) input: CreateRuleInput, @Ctx() ctx: ApiContext): Promise<Rule> {
    return ctx.services.rules.create(ctx.principal, { ...input });
  }

  @Mutation(() => RuleType, { description: "Fails with extensions.code CONFLICT when expectedVersion is given and is not the rule's version." })
  updateRule(
    @IdArg("id") id: string,
    @Arg("input", () => UpdateRuleInput) input: UpdateRuleInput,
    @Arg("expectedVersion", () => Int, { nullable: true }) expectedVersion: number | null,
    @Ctx() ctx: ApiContext,
  ): Promise<Rule> {
    return ctx.services.rules.update(ctx.principal, id, { ...input }, expectedVersion);
  }

  @Mutation(() => Boolean)
  deleteRule(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.rules.delete(ctx.principal, id);
  }

  @Query(() => [RuleRevisionType], { description: "Every change of the rule, oldest first; a deleted rule keeps its history." })
  ruleHistory(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<RuleRevision[]> {
    return ctx.services.rules.history(ctx.principal, id);
  }

  @Mutation(() => RuleType, { description: "Writes a new version equal to `version` of the rule's history (nothing changes when the rule already equals it)." })
  rollbackRule(@IdArg("id") id: string, @Arg("version", () => Int) version: number, @Ctx() ctx: ApiContext): Promise<Rule> {
    return ctx.services.rules.rollback(ctx.principal, id, version);
  }

  @Mutation(() => RuleType, { description: "Takes a LOG_ONLY (shadow) rule to enforcement; CONFLICT when the rule is not LOG_ONLY or not at expectedVersion." })
  promoteRule(
    @IdArg("id") id: string,
    @Arg("action", () => ActionEnum, { defaultValue: "REJECT" }) action: Action,
    @Arg("expectedVersion", () => Int, { nullable: true }) expectedVersion: number | null,
    @Ctx() ctx: ApiContext,
  ): Promise<Rule> {
    return ctx.services.rules.promote(ctx.principal, id, action, expectedVersion);
  }

  @Mutation(() => Boolean, { description: 'Forget one bucket\'s state, e.g. resetLimit(ruleId, "user:u42").' })
  resetLimit(@IdArg("ruleId") ruleId: string, @Arg("key", () => String) key: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.rules.resetLimit(ctx.principal, ruleId, key);
  }

  @FieldResolver(() => Int)
  windowSeconds(@Root() rule: Rule): number {
    return windowSecondsOf(rule.window, rule.windowUnit);
  }
}
