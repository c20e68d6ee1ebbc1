import { Field, ID, Int, ObjectType } from "type-graphql";
import type { RuleChangeKind } from "../../domain/events.js";
import { RuleChangeKindEnum } from "./enums.js";
import { OverrideType } from "./override.type.js";
import { RuleType } from "./rule.type.js";

@ObjectType("OverrideRevision", { simpleResolvers: true })
export class OverrideRevisionType {
  @Field(() => OverrideType, { nullable: true, description: "Null: the override was set for the first time." })
  before!: OverrideType | null;

  @Field(() => OverrideType, { nullable: true, description: "Null: the override was deleted." })
  after!: OverrideType | null;
}

@ObjectType("RuleRevision", { simpleResolvers: true, description: "One change of a rule. Deleting a rule keeps its history." })
export class RuleRevisionType {
  @Field(() => ID)
  ruleId!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => Int, { description: "The rule's version after the change; a deletion takes the version after the last one." })
  version!: number;

  @Field(() => RuleChangeKindEnum)
  kind!: RuleChangeKind;

  @Field(() => Date)
  at!: Date;

  @Field(() => String, { nullable: true, description: "Who made the change; null when not known." })
  actor!: string | null;

  @Field(() => String, { nullable: true, description: 'Why, where the fields do not say: "rolled back to version 2", "promoted from LOG_ONLY to REJECT", "imported from a rules file".' })
  note!: string | null;

  @Field(() => RuleType, { nullable: true, description: "The rule before the change; null for a creation." })
  before!: RuleType | null;

  @Field(() => RuleType, { nullable: true, description: "The rule after the change; null for a deletion." })
  after!: RuleType | null;

  @Field(() => OverrideRevisionType, { nullable: true, description: "For a change to one of the rule's overrides (its fields unchanged): the override before and after; null otherwise." })
  override!: OverrideRevisionType | null;
}
