import { Field, ID, Int, ObjectType } from "type-graphql";
import type { InvalidationKind, RuleChangeKind } from "../../domain/events.js";
import type { Action } from "../../domain/rule.js";
import { OTHER_KEYS } from "../../store/coalescing-event-bus.js";
import { ActionEnum, InvalidationKindEnum, RuleChangeKindEnum } from "./enums.js";
import { RuleType } from "./rule.type.js";

const KEY_DESCRIPTION = `The bucket, e.g. "user:u42"; "${OTHER_KEYS}" for buckets beyond the EVENT_MAX_KEYS tracked one by one in an interval.`;

/** The fields throttle and near-limit events share, in the contract's order. No query returns it, so the schema leaves it out. */
@ObjectType({ simpleResolvers: true })
abstract class LimitEventFields {
  @Field(() => Date)
  at!: Date;

  @Field(() => String)
  tenantId!: string;

  @Field(() => ID)
  ruleId!: string;

  @Field(() => String)
  ruleName!: string;

  @Field(() => String, { description: KEY_DESCRIPTION })
  key!: string;

  @Field(() => String, { nullable: true })
  resource!: string | null;

  @Field(() => String, { nullable: true })
  method!: string | null;

  @Field(() => ActionEnum)
  action!: Action;

  @Field(() => Int)
  limit!: number;
}

@ObjectType("ThrottleEvent", { simpleResolvers: true })
export class ThrottleEventType extends LimitEventFields {
  @Field(() => Int, { nullable: true })
  retryAfter!: number | null;

  @Field(() => Boolean, { description: "True for LOG_ONLY rules: the request was let through." })
  shadow!: boolean;

  @Field(() => Int, { description: "How many denials this event stands for (events are coalesced under a flood)." })
  count!: number;
}

@ObjectType("NearLimitEvent", { simpleResolvers: true,
  description: "Requests let through that left their bucket with under 10% of its limit: coalesced like throttle events.",
})
export class NearLimitEventType extends LimitEventFields {
  @Field(() => Int, { description: "What the bucket had left after the last request this event stands for." })
  remaining!: number;

  @Field(() => Boolean, { description: "True for LOG_ONLY rules." })
  shadow!: boolean;

  @Field(() => Int, { description: "How many requests this event stands for." })
  count!: number;
}

@ObjectType("RuleChange", { simpleResolvers: true })
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

@ObjectType("Invalidation", { simpleResolvers: true,
  description:
    "Something that makes remembered decisions stale: a rule changed, or one bucket was reset. Clients that cache refusals forget them on it; ids and keys only, never a rule's definition.",
})
export class InvalidationType {
  @Field(() => InvalidationKindEnum)
  kind!: InvalidationKind;

  @Field(() => String, { nullable: true, description: "The rule's tenant; null for LISTENING." })
  tenantId!: string | null;

  @Field(() => ID, { nullable: true, description: "Null for LISTENING." })
  ruleId!: string | null;

  @Field(() => String, { nullable: true, description: 'The bucket reset, e.g. "user:u42"; null: every bucket of the rule.' })
  key!: string | null;

  @Field(() => Date, { description: "When the rule changed; for the others, when this instance heard of it." })
  at!: Date;
}
