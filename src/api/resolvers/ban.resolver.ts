import { Arg, Ctx, Mutation, Query, Resolver, Root, Subscription } from "type-graphql";
import type { Ban } from "../../domain/ban.js";
import type { BanEvent } from "../../domain/events.js";
import { IdArg, TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { Topic } from "../event-pubsub.js";
import { BanEventType, BanInput, BanType } from "../types/ban.type.js";
import { watchable } from "./event.resolver.js";

@Resolver(() => BanType)
export class BanResolver {
  @Mutation(() => BanType, { description: "Bans one value of one identifier of a tenant's requests until a time: refused on every instance within a second (docs/bans.md)." })
  ban(@Arg("input", () => BanInput) input: BanInput, @Ctx() ctx: ApiContext): Promise<Ban> {
    return ctx.services.bans.ban(ctx.principal, { ...input });
  }

  @Mutation(() => Boolean, { description: "Lifts a ban: true when a live ban was lifted, false when there was none to lift (idempotent)." })
  unban(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.bans.unban(ctx.principal, id);
  }

  @Query(() => [BanType], { description: "The bans in force of a tenant (the caller's own by default; every tenant's for an ADMIN naming none)." })
  bans(@TenantIdArg() tenantId: string | null, @Ctx() ctx: ApiContext): Promise<Ban[]> {
    return ctx.services.bans.bans(ctx.principal, tenantId);
  }

  @Subscription(() => BanEventType, { topics: Topic.BAN_EVENTS, topicId: ({ args, context }) => watchable(context, args), description: "Bans placed and lifted, by hand or by a rule's autoBan." })
  banEvents(
    @Root() event: BanEvent,
    @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null,
  ): BanEvent {
    return event;
  }
}
