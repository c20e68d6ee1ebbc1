import { Arg, ID, Resolver, Root, Subscription } from "type-graphql";
import type { NearLimitEvent, RuleChange, ThrottleEvent } from "../../domain/events.js";
import { Topic } from "../event-pubsub.js";
import { NearLimitEventType, RuleChangeType, ThrottleEventType } from "../types/event.type.js";

@Resolver()
export class EventResolver {
  @Subscription(() => ThrottleEventType, { topics: Topic.THROTTLE_EVENTS, topicId: ({ args }) => args })
  throttleEvents(
    @Root() event: ThrottleEvent,
    @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null,
    @Arg("ruleId", () => ID, { nullable: true }) _ruleId: string | null,
  ): ThrottleEvent {
    return event;
  }

  @Subscription(() => NearLimitEventType, { topics: Topic.NEAR_LIMIT_EVENTS, topicId: ({ args }) => args })
  nearLimitEvents(
    @Root() event: NearLimitEvent,
    @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null,
    @Arg("ruleId", () => ID, { nullable: true }) _ruleId: string | null,
  ): NearLimitEvent {
    return event;
  }

  @Subscription(() => RuleChangeType, { topics: Topic.RULE_CHANGES, topicId: ({ args }) => args })
  ruleChanges(@Root() change: RuleChange, @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null): RuleChange {
    return change;
  }
}
