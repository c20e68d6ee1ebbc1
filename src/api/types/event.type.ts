import { Field, ID, Int, ObjectType } from "type-graphql";
import type { RuleChangeKind } from "../../domain/events.js";
import type { Action } from "../../domain/rule.js";
import { ActionEnum, RuleChangeKindEnum } from "./enums.js";
import { RuleType } from "./rule.type.js";

@ObjectType("ThrottleEvent")
export class ThrottleEventType {
  @Field(() => Date)
  at!: Date;

  @Field(() => String)
  tenantId!: string;

  @Field(() => ID)
  ruleId!: string;

  @Field(() => String)
  ruleName!: string;

  @Field(() => String)
  key!: string;

  @Field(() => String, { nullable: true })
  resource!: string | null;

  @Field(() => String, { nullable: true })
  method!: string | null;

  @Field(() => ActionEnum)
  action!: Action;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int, { nullable: true })
  retryAfter!: number | null;

  @Field(() => Boolean, { description: "True for LOG_ONLY rules: the request was let through." })
  shadow!: boolean;

  @Field(() => Int, { description: "How many denials this event stands for (events are coalesced under a flood)." })
  count!: number;
}

@ObjectType("RuleChange")
export class RuleChangeType {
  @Field(() => RuleChangeKindEnum)
  kind!: RuleChangeKind;

  @Field(() => ID)
  ruleId!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => Int)
  version!: number;

  @Field(() => RuleType, { nullable: true, description: "The rule after the change; null when deleted." })
  rule!: RuleType | null;

  @Field(() => Date)
  at!: Date;
}
