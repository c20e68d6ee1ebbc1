import { Field, InputType, Int } from "type-graphql";
import type { Action, Algorithm, Dimension, FailureMode, Reach, WindowUnit } from "../../domain/rule.js";
import { AutoBanInput } from "./ban.type.js";
import { AttributeConditionInput } from "./attribute.type.js";
import { RuleCalendarInput } from "./calendar.type.js";
import { ActionEnum, AlgorithmEnum, DimensionEnum, FailureModeEnum, ReachEnum, WindowUnitEnum } from "./enums.js";

@InputType()
export class CreateRuleInput {
  @Field(() => String)
  tenantId!: string;

  @Field(() => String)
  name!: string;

  @Field(() => [DimensionEnum], { nullable: true, defaultValue: [] })
  scope?: Dimension[] | null;

  @Field(() => [String], { nullable: true, defaultValue: [], description: "Attribute keys the buckets are keyed by too, after the scope's dimensions." })
  attributeKeys?: string[] | null;

  @Field(() => [AttributeConditionInput], { nullable: true, defaultValue: [], description: "The rule applies only to checks whose attributes meet every condition." })
  when?: AttributeConditionInput[] | null;

  @Field(() => String, { nullable: true })
  resource?: string | null;

  @Field(() => String, { nullable: true })
  method?: string | null;

  @Field(() => AlgorithmEnum, { nullable: true, defaultValue: "SLIDING_WINDOW_COUNTER" })
  algorithm?: Algorithm | null;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int)
  window!: number;

  @Field(() => WindowUnitEnum, { nullable: true, defaultValue: "SECONDS" })
  windowUnit?: WindowUnit | null;

  @Field(() => RuleCalendarInput, { nullable: true, description: "FIXED_WINDOW only: count per calendar period instead of per window; window and windowUnit are then not used." })
  calendar?: RuleCalendarInput | null;

  @Field(() => Int, { nullable: true })
  burst?: number | null;

  @Field(() => ActionEnum, { nullable: true, defaultValue: "REJECT" })
  action?: Action | null;

  @Field(() => FailureModeEnum, { nullable: true, defaultValue: "OPEN" })
  failureMode?: FailureMode | null;

  @Field(() => ReachEnum, { nullable: true, defaultValue: "REGIONAL" })
  reach?: Reach | null;

  @Field(() => Int, { nullable: true, defaultValue: 0 })
  priority?: number | null;

  @Field(() => Boolean, { nullable: true, defaultValue: true })
  enabled?: boolean | null;

  @Field(() => AutoBanInput, { nullable: true })
  autoBan?: AutoBanInput | null;
}

@InputType()
export class UpdateRuleInput {
  @Field(() => String, { nullable: true })
  name?: string | null;

  @Field(() => [DimensionEnum], { nullable: true })
  scope?: Dimension[] | null;

  @Field(() => [String], { nullable: true })
  attributeKeys?: string[] | null;

  @Field(() => [AttributeConditionInput], { nullable: true })
  when?: AttributeConditionInput[] | null;

  @Field(() => String, { nullable: true })
  resource?: string | null;

  @Field(() => String, { nullable: true })
  method?: string | null;

  @Field(() => AlgorithmEnum, { nullable: true })
  algorithm?: Algorithm | null;

  @Field(() => Int, { nullable: true })
  limit?: number | null;

  @Field(() => Int, { nullable: true })
  window?: number | null;

  @Field(() => WindowUnitEnum, { nullable: true })
  windowUnit?: WindowUnit | null;

  @Field(() => RuleCalendarInput, { nullable: true, description: "Replaces the rule's calendar; null removes it (the rule counts per window and windowUnit again)." })
  calendar?: RuleCalendarInput | null;

  @Field(() => Int, { nullable: true })
  burst?: number | null;

  @Field(() => ActionEnum, { nullable: true })
  action?: Action | null;

  @Field(() => FailureModeEnum, { nullable: true })
  failureMode?: FailureMode | null;

  @Field(() => ReachEnum, { nullable: true })
  reach?: Reach | null;

  @Field(() => Int, { nullable: true })
  priority?: number | null;

  @Field(() => Boolean, { nullable: true })
  enabled?: boolean | null;

  @Field(() => AutoBanInput, { nullable: true, description: "Null: no autoBan any more." })
  autoBan?: AutoBanInput | null;
}
