import { Arg, Ctx, Mutation, Query, Resolver } from "type-graphql";
import type { ApiKey } from "../../domain/ports.js";
import type { CreatedApiKey } from "../../engine/access/api-key-service.js";
import { IdArg, TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { ApiKeyType, CreateApiKeyInput, CreatedApiKeyType } from "../types/api-key.type.js";

@Resolver()
export class ApiKeyResolver {
  @Mutation(() => CreatedApiKeyType)
  createApiKey(@Arg("input", () => CreateApiKeyInput) input: CreateApiKeyInput, @Ctx() ctx: ApiContext): Promise<CreatedApiKey> {
    return ctx.services.keys.create(ctx.principal, { ...input });
  }

  @Mutation(() => Boolean)
  revokeApiKey(@IdArg("id") id: string, @Ctx() ctx: ApiContext): Promise<boolean> {
    return ctx.services.keys.revoke(ctx.principal, id);
  }

  @Query(() => [ApiKeyType])
  apiKeys(@TenantIdArg() tenantId: string | null, @Ctx() ctx: ApiContext): Promise<ApiKey[]> {
    return ctx.services.keys.list(ctx.principal, tenantId);
  }
}
