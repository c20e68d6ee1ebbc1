import { Field, ID, InputType, Int, ObjectType } from "type-graphql";
import type { Dimension, WindowUnit } from "../../domain/rule.js";
import type { OverrideMatch } from "../../domain/override.js";
import { DimensionEnum, OverrideMatchEnum, WindowUnitEnum } from "./enums.js";

@ObjectType("Override", {
  simpleResolvers: true,
  description: "One rule's limit replaced for the buckets of one identifier (exact, glob, or CIDR block for IP), up or down, optionally until expiresAt.",
})
export class OverrideType {
  @Field(() => ID)
  id!: string;

  @Field(() => ID)
  ruleId!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => DimensionEnum, { nullable: true, description: "The dimension whose value the identifier names; null when it names an attribute." })
  dimension!: Dimension | null;

  @Field(() => String, { nullable: true, description: "The attribute key whose value the identifier names; null when it names a dimension." })
  attributeKey!: string | null;

  @Field(() => OverrideMatchEnum)
  match!: OverrideMatch;

  @Field(() => String)
  identifier!: string;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int, { nullable: true, description: "TOKEN_BUCKET and LEAKY_BUCKET: the capacity; null: the override's limit." })
  burst!: number | null;

  @Field(() => Int, { nullable: true, description: "Null: the rule's window." })
  window!: number | null;

  @Field(() => WindowUnitEnum, { nullable: true })
  windowUnit!: WindowUnit | null;

  @Field(() => Date, { nullable: true, description: "From then on the override no longer applies, on every instance; null: never." })
  expiresAt!: Date | null;

  @Field(() => String, { nullable: true })
  note!: string | null;

  @Field(() => String, { nullable: true, description: "The API key that last set it." })
  actor!: string | null;

  @Field(() => Int, { description: "The rule's version this override was last written with." })
  version!: number;

  @Field(() => Date)
  createdAt!: Date;

  @Field(() => Date)
  updatedAt!: Date;
}

@InputType({ description: "An override: give exactly one of dimension and attributeKey, one the rule's buckets are keyed by." })
export class SetOverrideInput {
  @Field(() => ID)
  ruleId!: string;

  @Field(() => DimensionEnum, { nullable: true })
  dimension?: Dimension | null;

  @Field(() => String, { nullable: true })
  attributeKey?: string | null;

  @Field(() => OverrideMatchEnum, { nullable: true, defaultValue: "EXACT" })
  match?: OverrideMatch | null;

  @Field(() => String)
  identifier!: string;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int, { nullable: true })
  burst?: number | null;

  @Field(() => Int, { nullable: true })
  window?: number | null;

  @Field(() => WindowUnitEnum, { nullable: true })
  windowUnit?: WindowUnit | null;

  @Field(() => Date, { nullable: true })
  expiresAt?: Date | null;

  @Field(() => String, { nullable: true })
  note?: string | null;
}

@ObjectType("OverridePage", { simpleResolvers: true })
export class OverridePageType {
  @Field(() => [OverrideType])
  items!: OverrideType[];

  @Field(() => String, { nullable: true, description: "Pass as `after` for the next page; null when this is the last." })
  endCursor!: string | null;

  @Field(() => Boolean)
  hasNextPage!: boolean;
}
