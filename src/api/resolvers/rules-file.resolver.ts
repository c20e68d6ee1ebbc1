import { Arg, Ctx, Mutation, Query, Resolver } from "type-graphql";
import type { ImportReport } from "../../engine/rules/rule-service.js";
import { TenantIdArg } from "../args.js";
import type { ApiContext } from "../context.js";
import { RuleImportReportType } from "../types/rules-file.type.js";

@Resolver()
export class RulesFileResolver {
  @Mutation(() => RuleImportReportType, {
    description: "Validates a whole YAML rules file, then writes all of its changes in one transaction, or none when anything is wrong. Rules are identified by (tenantId, name).",
  })
  importRules(
    @Arg("yaml", () => String) yaml: string,
    @Arg("dryRun", () => Boolean, { nullable: true, defaultValue: false }) dryRun: boolean | null,
    @Ctx() ctx: ApiContext,
  ): Promise<ImportReport> {
    return ctx.services.rules.importRules(ctx.principal, yaml, { dryRun: dryRun ?? false });
  }

  @Query(() => String, { description: "The stored rules (of one tenant, or all) as a YAML rules file that imports back unchanged." })
  exportRules(@TenantIdArg() tenantId: string | null, @Ctx() ctx: ApiContext): Promise<string> {
    return ctx.services.rules.exportRules(ctx.principal, tenantId);
  }
}
