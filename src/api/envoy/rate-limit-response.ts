/**
 * A joint decision as Envoy's RateLimitResponse. The overall code is the
 * request's: OVER_LIMIT when any enforcing rule of any descriptor refuses it
 * (and then nothing was counted). Each status is its descriptor's own rules:
 * the deciding one's limit, what remains of it and when it is whole again,
 * OVER_LIMIT when one of them refuses. LOG_ONLY rules never refuse (their
 * would-be refusals are shadow events). A THROTTLE rule that admits with a
 * delay answers OK, since Envoy cannot hold a request back: the delay travels
 * upstream in the request header FLOODGATE_DELAY_HEADER for the backend to
 * honour; when its line is full it refuses like REJECT. The response headers
 * are those a GraphQL check returns (X-RateLimit-*, Retry-After, RateLimit-Policy,
 * RateLimit), which Envoy adds to the response, the 429 included.
 */

import type { CalendarPeriod } from "../../domain/calendar.js";
import type { Decision, RuleResult } from "../../domain/decision.js";
import { windowSecondsOf } from "../../domain/rule.js";
import type { JointDecision } from "../../engine/decision/limiter.js";

export const FLOODGATE_DELAY_HEADER = "x-floodgate-delay-ms";

type Code = "OK" | "OVER_LIMIT";
/** A calendar's periods are Envoy's units of the same names. */
type Unit = "UNKNOWN" | "SECOND" | CalendarPeriod;

export interface HeaderValueMessage {
  key: string;
  value: string;
}

export interface DescriptorStatusMessage {
  code: Code;
  current_limit: { name: string; requests_per_unit: number; unit: Unit } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: number; nanos: number } | null;
}

export interface RateLimitResponseMessage {
  overall_code: Code;
  statuses: DescriptorStatusMessage[];
  response_headers_to_add: HeaderValueMessage[];
  request_headers_to_add: HeaderValueMessage[];
}

const UNIT_SECONDS: readonly [number, Unit][] = [
  [1, "SECOND"],
  [60, "MINUTE"],
  [3600, "HOUR"],
  [86_400, "DAY"],
];

const MAX_UINT32 = 0xffff_ffff;

export function rateLimitResponse({ decision, parts }: JointDecision): RateLimitResponseMessage {
  const delayed = decision.allowed && decision.delayMs !== null && decision.delayMs > 0;
  return {
    overall_code: decision.allowed ? "OK" : "OVER_LIMIT",
    statuses: parts.map(descriptorStatus),
    response_headers_to_add: decision.headers.map(({ name, value }) => ({ key: name, value })),
    request_headers_to_add: delayed ? [{ key: FLOODGATE_DELAY_HEADER, value: String(decision.delayMs) }] : [],
  };
}

function descriptorStatus(part: Decision): DescriptorStatusMessage {
  const refused = part.results.some((r) => !r.allowed && r.rule.action !== "LOG_ONLY");
  const code: Code = refused ? "OVER_LIMIT" : "OK";
  const deciding = part.results.find((r) => r.rule === part.rule);
  if (deciding === undefined || part.resetAt === null) return { code, current_limit: null, limit_remaining: 0, duration_until_reset: null };
  const untilResetMs = Math.max(0, part.resetAt.getTime() - part.decidedAt.getTime());
  return {
    code,
    current_limit: currentLimit(deciding),
    limit_remaining: Math.min(MAX_UINT32, Math.max(0, Math.floor(part.remaining ?? 0))),
    duration_until_reset: { seconds: Math.floor(untilResetMs / 1000), nanos: (untilResetMs % 1000) * 1_000_000 },
  };
}

/**
 * The deciding rule's limit as Envoy's RateLimit (an override's window where
 * one applies): a window of exactly one second, minute, hour or day is its
 * unit; any other window has no unit of Envoy's (UNKNOWN), and the name says
 * it ("per-ip (100 per 10 s)"). A calendar rule's unit is its period.
 */
function currentLimit({ rule, override, limit }: RuleResult): DescriptorStatusMessage["current_limit"] {
  if (rule.calendar !== null) return { name: rule.name, requests_per_unit: Math.min(MAX_UINT32, limit), unit: rule.calendar.period };
  const windowSeconds =
    override?.window != null && override.windowUnit != null ? windowSecondsOf(override.window, override.windowUnit) : windowSecondsOf(rule.window, rule.windowUnit);
  const unit = UNIT_SECONDS.find(([seconds]) => seconds === windowSeconds)?.[1];
  const requestsPerUnit = Math.min(MAX_UINT32, limit);
  if (unit !== undefined) return { name: rule.name, requests_per_unit: requestsPerUnit, unit };
  return { name: `${rule.name} (${limit} per ${windowSeconds} s)`, requests_per_unit: requestsPerUnit, unit: "UNKNOWN" };
}
