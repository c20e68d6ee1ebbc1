import { Field, ID, Int, ObjectType } from "type-graphql";
import type { BreakerState } from "../../domain/circuit-breaker.js";
import { OTHER_BUCKETS } from "../../domain/usage.js";

@ObjectType("UsagePoint", { simpleResolvers: true, description: "One step of a rule's usage: each rule's own verdicts, summed over every instance." })
export class UsagePointType {
  @Field(() => Date, { description: "The start of the step." })
  at!: Date;

  @Field(() => Int, { description: "Checks the rule admitted (another rule may still have refused the request)." })
  allowed!: number;

  @Field(() => Int, { description: "Checks the rule refused (REJECT, or THROTTLE with its line full)." })
  refused!: number;

  @Field(() => Int, { description: "Checks a LOG_ONLY rule would have refused: what promoting it would refuse." })
  shadowRefused!: number;
}

@ObjectType("TopBucket", { simpleResolvers: true })
export class TopBucketType {
  @Field(() => String, { description: "The tenant whose requests were refused." })
  tenantId!: string;

  @Field(() => ID)
  ruleId!: string;

  @Field(() => String, { nullable: true, description: "Null when the rule is gone." })
  ruleName!: string | null;

  @Field(() => String, { description: `The bucket, as resetLimit takes it; "${OTHER_BUCKETS}" for the refusals of buckets beyond those an instance counts one by one.` })
  key!: string;

  @Field(() => Int, { description: "Refusals (shadow refusals included) over the period." })
  refusals!: number;
}

@ObjectType("Breaker", { simpleResolvers: true })
export class BreakerType {
  @Field(() => String, { description: 'The shard: "redis", or a Redis Cluster master\'s "host:port".' })
  shard!: string;

  @Field(() => String, { description: "closed (Redis decides), open (each rule's failureMode decides), half-open (one trial call under way)." })
  state!: BreakerState;
}

@ObjectType("RulesHealth", { simpleResolvers: true })
export class RulesHealthType {
  @Field(() => String, { nullable: true, description: '"database", or "snapshot" while the rule database could not be read since the start; null before the first load.' })
  source!: string | null;

  @Field(() => Int)
  count!: number;

  @Field(() => Date, { nullable: true })
  loadedAt!: Date | null;
}

@ObjectType("Health", { simpleResolvers: true, description: "This instance's view of the service, for an operator." })
export class HealthType {
  @Field(() => Boolean, { description: "A counter store breaker is not closed: some checks are decided by their rules' failureMode (degraded)." })
  degraded!: boolean;

  @Field(() => [BreakerType])
  breakers!: { shard: string; state: BreakerState }[];

  @Field(() => RulesHealthType)
  rules!: RulesHealthType;

  @Field(() => Int, { nullable: true, description: "Instances that reported usage within the last three USAGE_FLUSH_MS; null when not known (USAGE_FLUSH_MS=0, or the counter store unreachable)." })
  instances!: number | null;
}
