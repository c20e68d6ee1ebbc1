import type { GraphQLFieldResolver, GraphQLObjectType, GraphQLSchema } from "graphql";
import { Arg, Ctx, Mutation, Query, Resolver } from "type-graphql";
import type { Decision } from "../../domain/decision.js";
import { headerLinesOf } from "../../domain/header-lines.js";
import { parseCheckRequest } from "../../domain/request.js";
import type { ApiContext } from "../context.js";
import { admitOperationChecks } from "../operation-checks.js";
import { CheckLimitsInput, LimitDecisionType } from "../types/decision.type.js";

/** Both check fields count against the operation's MAX_BATCH checks (operation-checks.ts) before their arguments are read: see resolveChecksDirectly. */
@Resolver()
export class LimitResolver {
  @Query(() => LimitDecisionType)
  checkLimits(@Arg("request", () => CheckLimitsInput) request: CheckLimitsInput, @Ctx() ctx: ApiContext): Promise<Decision> {
    return ctx.check([parseCheckRequest(request)]).then(([decision]) => decision!);
  }

  /** All checks are validated before any is counted: one bad request fails the batch and changes nothing. */
  @Query(() => [LimitDecisionType])
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

/**
 * Puts the check fields' own resolve functions in place of type-graphql's,
 * in the built schema: the decorators above still define the fields, their
 * arguments and types, and these call the same methods, after the
 * operation's check count is admitted. type-graphql's resolve turns every
 * argument into instances of its input classes (looking each field's class
 * up again among all input types, for every check), passes them through an
 * async validation step even with validation off, and runs the resolver
 * through its middleware chain: 8% of the server's instructions per check
 * in a client's batches of 16 and 6% of a single check's (npm run
 * server:instructions -- --client, -- --single). The
 * methods get the arguments as GraphQL coerced them, plain objects with the
 * same fields: CheckLimitsInput and AttributeInput declare fields only, no
 * methods or defaults of their own.
 *
 * Async, as type-graphql's were: a refusal (bad input, the cap) is a rejected
 * promise, never a throw. graphql-js runs no more of an operation's root
 * fields once a non-null one throws, where graphql-jit runs them all, so a throw
 * would have the fast path count the checks of a refused field's siblings
 * and Apollo not.
 */
export function resolveChecksDirectly(schema: GraphQLSchema): void {
  const limits = new LimitResolver();
  const fields = schema.getQueryType()!.getFields();
  // A request refused for its input (parsed before anything is loaded) refuses the operation's other checks too (context.ts).
  const checkLimits: GraphQLFieldResolver<unknown, ApiContext, { request: CheckLimitsInput }> = async (_root, { request }, context, info) => {
    admitOperationChecks(context, info);
    try {
      return limits.checkLimits(request, context);
    } catch (error) {
      context.refuseChecks(error);
      throw error;
    }
  };
  const checkLimitsBatch: GraphQLFieldResolver<unknown, ApiContext, { requests: CheckLimitsInput[] }> = async (_root, { requests }, context, info) => {
    admitOperationChecks(context, info);
    try {
      return limits.checkLimitsBatch(requests, context);
    } catch (error) {
      context.refuseChecks(error);
      throw error;
    }
  };
  fields.checkLimits!.resolve = checkLimits as GraphQLFieldResolver<unknown, unknown>;
  fields.checkLimitsBatch!.resolve = checkLimitsBatch as GraphQLFieldResolver<unknown, unknown>;
}

/**
 * LimitDecision.headerLines, formed from the decision's headers only when
 * selected (a decision holds the list alone): a resolve function of its own
 * in the built schema, like the check fields', where a type-graphql field
 * resolver would run its middleware chain for every decision.
 */
export function resolveHeaderLines(schema: GraphQLSchema): void {
  const decision = schema.getType("LimitDecision") as GraphQLObjectType<Decision>;
  decision.getFields().headerLines!.resolve = (decided: Decision) => headerLinesOf(decided.headers);
}
