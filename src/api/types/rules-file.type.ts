import { Field, Int, ObjectType } from "type-graphql";
import { RuleType } from "./rule.type.js";

@ObjectType("ImportedRule", { simpleResolvers: true })
export class ImportedRuleType {
  @Field(() => String)
  tenantId!: string;

  @Field(() => String)
  name!: string;

  @Field(() => Int, { description: "Where the rule's entry starts in the file." })
  line!: number;

  @Field(() => RuleType, {
    nullable: true,
    description: "The rule as stored when the import returns: for a dry run or an invalid file that is before any change, so null for one still to be created.",
  })
  rule!: RuleType | null;
}

@ObjectType("RuleImportProblem", { simpleResolvers: true })
export class RuleImportProblemType {
  @Field(() => Int, { nullable: true })
  line!: number | null;

  @Field(() => Int, { nullable: true })
  column!: number | null;

  @Field(() => String, { nullable: true, description: 'The field at fault as the file names it, e.g. "rules[2].limit"; null for a problem of the YAML itself.' })
  field!: string | null;

  @Field(() => String)
  message!: string;
}

@ObjectType("RuleImportReport", { simpleResolvers: true, description: "What an import did, or would do: nothing is written unless the whole file is valid." })
export class RuleImportReportType {
  @Field(() => Boolean)
  dryRun!: boolean;

  @Field(() => Boolean, { description: "The file was valid, not a dry run, and every change it asks for is written (in one transaction)." })
  applied!: boolean;

  @Field(() => [ImportedRuleType])
  created!: ImportedRuleType[];

  @Field(() => [ImportedRuleType])
  updated!: ImportedRuleType[];

  @Field(() => [ImportedRuleType])
  unchanged!: ImportedRuleType[];

  @Field(() => [RuleImportProblemType], { description: "Every problem found, each with its line and field." })
  invalid!: RuleImportProblemType[];

  @Field(() => Int, { description: "Entries of the file's `lists` added (for a dry run or an invalid file: to be added)." })
  listEntriesAdded!: number;

  @Field(() => Int, { description: "Entries of the file's `lists` their list already holds (left as they are)." })
  listEntriesUnchanged!: number;
}
