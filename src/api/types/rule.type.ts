import { Field, ID, Int, ObjectType } from "type-graphql";
import type { Action, Algorithm, AutoBan, Dimension, FailureMode, Reach, WindowUnit } from "../../domain/rule.js";
import { AutoBanType } from "./ban.type.js";
import { AttributeConditionType } from "./attribute.type.js";
import { RuleCalendarType } from "./calendar.type.js";
import { ActionEnum, AlgorithmEnum, DimensionEnum, FailureModeEnum, ReachEnum, WindowUnitEnum } from "./enums.js";

@ObjectType("Rule", { simpleResolvers: true })
export class RuleType {
  @Field(() => ID)
  id!: string;

  @Field(() => String, { description: 'The tenant the rule belongs to; "*" applies it to every tenant.' })
  tenantId!: string;

  @Field(() => String)
  name!: string;

  @Field(() => [DimensionEnum], { description: "Dimensions the buckets are keyed by; empty: one bucket shared by every request the rule matches." })
  scope!: Dimension[];

  @Field(() => [String], { description: "Attribute keys the buckets are keyed by too, after the scope's dimensions (sorted)." })
  attributeKeys!: string[];

  @Field(() => [AttributeConditionType], { description: "Conditions on the check's attributes, all of which must hold for the rule to apply; empty: every check." })
  when!: AttributeConditionType[];

  @Field(() => String, { nullable: true, description: 'Glob over the request\'s resource ("/api/v1/*", "/api/**"); null matches every resource.' })
  resource!: string | null;

  @Field(() => String, { nullable: true, description: "HTTP method the rule applies to (a GET rule also to HEAD, which runs the GET handler); null matches every method." })
  method!: string | null;

  @Field(() => AlgorithmEnum)
  algorithm!: Algorithm;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int)
  window!: number;

  @Field(() => WindowUnitEnum)
  windowUnit!: WindowUnit;

  @Field(() => Int)
  windowSeconds!: number;

  @Field(() => RuleCalendarType, { nullable: true, description: "When set, the window is this calendar period, and window, windowUnit and windowSeconds are not used." })
  calendar!: RuleCalendarType | null;

  @Field(() => Int, { nullable: true, description: "Token bucket capacity, or how many requests may wait in a leaky bucket." })
  burst!: number | null;

  @Field(() => ActionEnum)
  action!: Action;

  @Field(() => FailureModeEnum)
  failureMode!: FailureMode;

  @Field(() => ReachEnum)
  reach!: Reach;

  @Field(() => Int, { description: "Higher first when several rules decide alike." })
  priority!: number;

  @Field(() => Boolean)
  enabled!: boolean;

  @Field(() => AutoBanType, { nullable: true, description: "Null: refusals ban nobody." })
  autoBan!: AutoBan | null;

  @Field(() => Int, { description: "Increases by one on every change." })
  version!: number;

  @Field(() => Date)
  createdAt!: Date;

  @Field(() => Date)
  updatedAt!: Date;
}
