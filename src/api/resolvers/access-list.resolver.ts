import { Arg, Ctx, Mutation, Query, Resolver } from "type-graphql";
import type { AccessList, ListEntry, ListEntryChange } from "../../domain/access-list.js";
import { IdArg, TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { AddListEntryInput, ListEntryChangeType, ListEntryType } from "../types/access-list.type.js";
import { AccessListEnum } from "../types/enums.js";

@Resolver(() => ListEntryType)
export class AccessListResolver {
  @Mutation(() => ListEntryType, { description: "Adds an entry to a tenant's deny or allow list; every instance screens with it within milliseconds." })
  addListEntry(@Arg("input", () => AddListEntryInput) input: AddListEntryInput, @Ctx() ctx: ApiContext): Promise<ListEntry> {
    return ctx.services.accessLists.add(ctx.principal, { ...input });
  }

  @Mutation(() => Boolean)
  removeListEntry(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.accessLists.remove(ctx.principal, id);
  }

  @Query(() => [ListEntryType], { description: "A tenant's access list entries, oldest first: one list, or both when `list` is null. No tenantId: the caller's own (every tenant's for an ADMIN)." })
  listEntries(
    @TenantIdArg() tenantId: string | undefined,
    @Arg("list", () => AccessListEnum, { nullable: true }) list: AccessList | null | undefined,
    @Ctx() ctx: ApiContext,
  ): Promise<ListEntry[]> {
    return ctx.services.accessLists.list(ctx.principal, tenantId, list ?? null);
  }

  @Query(() => [ListEntryChangeType], { description: "A tenant's access list entries added and removed, oldest first, with who and when. No tenantId: the caller's own." })
  listEntryHistory(@TenantIdArg() tenantId: string | undefined, @Ctx() ctx: ApiContext): Promise<ListEntryChange[]> {
    return ctx.services.accessLists.history(ctx.principal, tenantId);
  }
}
