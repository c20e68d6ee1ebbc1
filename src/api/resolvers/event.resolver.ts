import { Arg, ID, Resolver, Root, Subscription } from "type-graphql";
import type { Invalidation, NearLimitEvent, RuleChange, ThrottleEvent } from "../../domain/events.js";
import { may, scopeTenant } from "../../domain/access.js";
import { referenceArgs } from "../args.js";
import type { ApiContext } from "../context.js";
import { Topic, type EventArgs, type EventFilter } from "../event-pubsub.js";
import { InvalidationType, NearLimitEventType, RuleChangeType, ThrottleEventType } from "../types/event.type.js";

@Resolver()
export class EventResolver {
  @Subscription(() => ThrottleEventType, { topics: Topic.THROTTLE_EVENTS, topicId: ({ args, context }) => watchable(context, args) })
  throttleEvents(
    @Root() event: ThrottleEvent,
    @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null,
    @Arg("ruleId", () => ID, { nullable: true }) _ruleId: string | null,
  ): ThrottleEvent {
    return event;
  }

  @Subscription(() => NearLimitEventType, { topics: Topic.NEAR_LIMIT_EVENTS, topicId: ({ args, context }) => watchable(context, args) })
  nearLimitEvents(
    @Root() event: NearLimitEvent,
    @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null,
    @Arg("ruleId", () => ID, { nullable: true }) _ruleId: string | null,
  ): NearLimitEvent {
    return event;
  }

  @Subscription(() => RuleChangeType, { topics: Topic.RULE_CHANGES, topicId: ({ args, context }) => watchable(context, args) })
  ruleChanges(@Root() change: RuleChange, @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null): RuleChange {
    return change;
  }

  @Subscription(() => InvalidationType, {
    topics: Topic.INVALIDATIONS,
    topicId: ({ args, context }) => checkable(context, args),
    description:
      'What makes remembered decisions of the tenant stale: its rules\' and "*" rules\' changes and bucket resets. Any key that may check the tenant\'s limits may subscribe (CHECKER too), so that its client can keep cached refusals honest.',
  })
  invalidations(@Root() invalidation: Invalidation, @Arg("tenantId", () => String, { nullable: true }) _tenantId: string | null): Invalidation {
    return invalidation;
  }
}

/**
 * The invalidations a subscriber may receive: those of a tenant whose limits
 * it may check (an ADMIN asking for none: every tenant's; which "*" rules'
 * reach a tenant, src/api/invalidations.ts says), and none at all once its
 * key is revoked, judged again for every one.
 */
function checkable(context: unknown, args: EventArgs): EventFilter {
  const { principal, services } = context as ApiContext;
  const { tenantId } = referenceArgs(args);
  return { tenantId: scopeTenant(principal, "checkLimits", tenantId), mayReceive: () => !services.keys.isRevoked(principal) };
}

/**
 * The events a subscriber may receive: its own tenant's unless it is an ADMIN
 * (FORBIDDEN for another tenant), and none at all once its key is revoked,
 * judged again for every event.
 */
export function watchable(context: unknown, args: EventArgs): EventFilter {
  const { principal, services } = context as ApiContext;
  const { tenantId, ruleId } = referenceArgs(args);
  return {
    ruleId,
    tenantId: scopeTenant(principal, "watchEvents", tenantId),
    mayReceive: (eventTenant) => !services.keys.isRevoked(principal) && may(principal, "watchEvents", eventTenant),
  };
}
