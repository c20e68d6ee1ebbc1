import { Field, Float, InputType, Int, ObjectType } from "type-graphql";
import type { DecisionSource } from "../../domain/decision.js";
import type { Action } from "../../domain/rule.js";
import type { DecisionReasonCode } from "../../domain/screening.js";
import { AttributeInput } from "./attribute.type.js";
import { ActionEnum, DecisionReasonCodeEnum, DecisionSourceEnum } from "./enums.js";
import { OverrideType } from "./override.type.js";
import { RuleType } from "./rule.type.js";

@InputType()
export class CheckLimitsInput {
  @Field(() => String)
  tenantId!: string;

  @Field(() => String, { nullable: true })
  userId?: string | null;

  @Field(() => String, { nullable: true })
  ip?: string | null;

  @Field(() => String, { nullable: true })
  apiKey?: string | null;

  @Field(() => String, { nullable: true })
  userAgent?: string | null;

  @Field(() => String, {
    nullable: true,
    description: "The caller's cookie (a session cookie's value): part of the CLIENT fingerprint, never shown in a bucket key.",
  })
  cookie?: string | null;

  @Field(() => String, { nullable: true, description: 'The path being requested, e.g. "/api/v1/orders".' })
  resource?: string | null;

  @Field(() => String, { nullable: true })
  method?: string | null;

  @Field(() => Int, { nullable: true, defaultValue: 1, description: "How many units this request consumes." })
  cost?: number | null;

  @Field(() => Boolean, { nullable: true, defaultValue: false, description: "Evaluate without consuming anything." })
  dryRun?: boolean | null;

  @Field(() => [AttributeInput], {
    nullable: true,
    description: "Business attributes (plan, region, route group...): rules may be keyed by them (attributeKeys) and apply only to some of their values (when). At most 16, each key once.",
  })
  attributes?: AttributeInput[] | null;

  @Field(() => Boolean, {
    nullable: true,
    defaultValue: false,
    description:
      'The app routes paths without regard to letter case (Express\'s default): resource globs match the path without regard to case, and an ENDPOINT bucket counts "/API/Orders" and "/api/orders" as one path, the lower-cased one.',
  })
  ignorePathCase?: boolean | null;
}

@ObjectType("HttpHeader", { simpleResolvers: true })
export class HttpHeaderType {
  @Field(() => String)
  name!: string;

  @Field(() => String)
  value!: string;
}

@ObjectType("RuleResult", { simpleResolvers: true, description: "One rule's verdict on one request." })
export class RuleResultType {
  @Field(() => RuleType)
  rule!: RuleType;

  @Field(() => String, { description: 'The bucket this request counted against, e.g. "user:u42".' })
  key!: string;

  @Field(() => OverrideType, { nullable: true, description: "The override that gave this bucket its limit (limit, remaining and the headers are then the override's); null: the rule's own." })
  override!: OverrideType | null;

  @Field(() => Boolean)
  allowed!: boolean;

  @Field(() => Int)
  limit!: number;

  @Field(() => Int)
  remaining!: number;

  @Field(() => Date)
  resetAt!: Date;

  @Field(() => Int, { nullable: true, description: "Seconds until a request like this one would be allowed; null when allowed." })
  retryAfter!: number | null;

  @Field(() => Float, {
    nullable: true,
    description:
      "Milliseconds until a request like this one would be allowed, as the counter store worked it out (retryAfter is this rounded up to whole seconds); null when allowed. Whole milliseconds, as a Float: a month's wait is past Int's 24.8 days.",
  })
  retryAfterMs!: number | null;

  @Field(() => Int, { description: "THROTTLE: milliseconds this rule holds the request; 0 otherwise." })
  delayMs!: number;

  @Field(() => Boolean, {
    description:
      "False when this rule's bucket was not read, because the over-limit cache refused the request on another rule's account (source OVER_LIMIT_CACHE). Nothing was counted against it; its allowed, remaining and resetAt are then true, the limit, and decidedAt, and it is left out of the RateLimit field (RateLimit-Policy still names it).",
  })
  consulted!: boolean;

  @Field(() => Date, {
    nullable: true,
    description:
      "When the counter store read this bucket, by the store's clock (Redis TIME with Redis): remaining and resetAt are as of then. When the over-limit cache answered (source OVER_LIMIT_CACHE), this is when the store read the refusal that filled the cache, not now: remaining and resetAt are that refusal's. Null when the store did not read the bucket: consulted is false, or the decision is degraded.",
  })
  readAt!: Date | null;
  @Field(() => Boolean, { description: "The rule admits the request and has under 10% of its limit left (envoy's near_limit)." })
  nearLimit!: boolean;
}

@ObjectType("DecisionReason", { simpleResolvers: true, description: "Why a request was decided before its rules: an access list entry or a ban." })
export class DecisionReasonType {
  @Field(() => DecisionReasonCodeEnum)
  code!: DecisionReasonCode;

  @Field(() => String, { description: "For people: which entry or ban decided, in words." })
  message!: string;

  @Field(() => Date, { nullable: true, description: "When the verdict ends (a ban's end); null until the entry is removed." })
  until!: Date | null;
}

@ObjectType("Lease", { simpleResolvers: true, description: "The slots a request admitted by CONCURRENCY rules holds while it is in flight." })
export class LeaseType {
  @Field(() => String, { description: "Opaque: pass it to releaseLease when the request ends." })
  id!: string;

  @Field(() => Date, { description: "When the first of its slots frees itself if it is never released: its rules' shortest window after decidedAt." })
  expiresAt!: Date;
}

@ObjectType("LimitDecision", { simpleResolvers: true })
export class LimitDecisionType {
  @Field(() => Boolean, { description: "False when any rule that applies denies. Nothing is consumed from any rule then." })
  allowed!: boolean;

  @Field(() => Boolean, {
    description: "True when the counter store could not be reached and each rule decided by its failureMode (OPEN, CLOSED, LOCAL).",
  })
  degraded!: boolean;

  @Field(() => Date, {
    description:
      "When the decision was made, by the counter store's clock (Redis TIME with Redis), or this instance's when the over-limit cache or a failure mode made it.",
  })
  decidedAt!: Date;

  @Field(() => DecisionSourceEnum, { nullable: true, description: "Who decided; null when no rule applies." })
  source!: DecisionSource | null;

  @Field(() => DecisionReasonType, {
    nullable: true,
    description: "Set when a screen decided before any rule (source SCREENING): an access list entry or a ban. Null when the rules decided.",
  })
  reason!: DecisionReasonType | null;

  @Field(() => RuleType, { nullable: true, description: "The most restrictive rule that applies; null when no rule applies." })
  rule!: RuleType | null;

  @Field(() => ActionEnum, { nullable: true })
  action!: Action | null;

  @Field(() => Int, { nullable: true })
  limit!: number | null;

  @Field(() => Int, { nullable: true })
  remaining!: number | null;

  @Field(() => Date, { nullable: true })
  resetAt!: Date | null;

  @Field(() => Int, { nullable: true, description: "Seconds to wait before retrying; set when allowed is false." })
  retryAfter!: number | null;

  @Field(() => Float, {
    nullable: true,
    description:
      "Milliseconds to wait before retrying; set when allowed is false. retryAfter and Retry-After are this rounded up to whole seconds: a client that retries by itself, or caches the refusal, need not wait out the rounding. Whole milliseconds, as a Float: a month's wait is past Int's 24.8 days.",
  })
  retryAfterMs!: number | null;

  @Field(() => Int, { nullable: true, description: "THROTTLE: milliseconds to hold the request before serving it." })
  delayMs!: number | null;

  @Field(() => Boolean, { description: "The request is allowed, and an enforcing rule (not LOG_ONLY) has under 10% of its limit left: slow down before being refused." })
  nearLimit!: boolean;

  @Field(() => [RuleResultType], { description: "Every rule that applied, most restrictive first." })
  results!: RuleResultType[];

  @Field(() => [HttpHeaderType], {
    description:
      "Headers to put on the HTTP response as they are: X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, RateLimit-Policy, RateLimit.",
  })
  headers!: HttpHeaderType[];

  @Field(() => String, {
    description:
      'The same headers as one text: each a "Name: value" line, the lines joined by "\\n" (empty when there are none). Neither a name nor a value holds a line end, and a name ends at its line\'s first ": ". Cheaper to send and to read than the list for every decision: the client selects it.',
  })
  headerLines!: string;

  @Field(() => LeaseType, {
    nullable: true,
    description:
      "Set when CONCURRENCY rules admitted the request: it holds a slot of each until releaseLease(id) (call it when the request ends) or until the lease expires. Null otherwise: no such rule, refused, or a dry run.",
  })
  lease?: LeaseType | null;
}
