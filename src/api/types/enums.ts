import { registerEnumType } from "type-graphql";
import { ACCESS_LISTS, LIST_ENTRY_CHANGE_KINDS, LIST_ENTRY_KINDS } from "../../domain/access-list.js";
import { DECISION_SOURCES } from "../../domain/decision.js";
import { INVALIDATION_KINDS, RULE_CHANGE_KINDS } from "../../domain/events.js";
import { OVERRIDE_MATCHES } from "../../domain/override.js";
import { DECISION_REASON_CODES } from "../../domain/screening.js";
import { ACTIONS, ALGORITHMS, DIMENSIONS, FAILURE_MODES, REACHES, WINDOW_UNITS } from "../../domain/rule.js";

/** type-graphql registers enums from objects; the domain keeps them as lists of names. */
export function enumObject<T extends string>(values: readonly T[]): { [K in T]: K } {
  return Object.fromEntries(values.map((v) => [v, v])) as { [K in T]: K };
}

export const DimensionEnum = enumObject(DIMENSIONS);
export const AlgorithmEnum = enumObject(ALGORITHMS);
export const ActionEnum = enumObject(ACTIONS);
export const FailureModeEnum = enumObject(FAILURE_MODES);
export const ReachEnum = enumObject(REACHES);
export const WindowUnitEnum = enumObject(WINDOW_UNITS);
export const DecisionSourceEnum = enumObject(DECISION_SOURCES);
export const DecisionReasonCodeEnum = enumObject(DECISION_REASON_CODES);
export const RuleChangeKindEnum = enumObject(RULE_CHANGE_KINDS);
export const InvalidationKindEnum = enumObject(INVALIDATION_KINDS);

registerEnumType(DimensionEnum, {
  name: "Dimension",
  description: "Which part of a request a rule's buckets are keyed by.",
  valuesConfig: {
    TENANT: { description: "The request's tenant: one bucket per tenant." },
    USER: { description: "The request's userId." },
    IP: { description: "The request's ip." },
    API_KEY: { description: "The request's apiKey." },
    CLIENT: { description: "A fingerprint of the caller: a hash over ip, userAgent, apiKey and cookie." },
    ENDPOINT: { description: 'The request\'s method and resource together, e.g. "POST /api/v1/orders".' },
  },
});

registerEnumType(AlgorithmEnum, {
  name: "Algorithm",
  valuesConfig: {
    SLIDING_WINDOW_COUNTER: { description: "Weighted previous + current fixed window (the default)." },
    TOKEN_BUCKET: { description: "Capacity = burst (default limit), refilled at limit per window." },
    FIXED_WINDOW: { description: "One counter per aligned window." },
    SLIDING_WINDOW_LOG: { description: "Exact: one timestamp per admitted request in the trailing window." },
    LEAKY_BUCKET: { description: "Requests leak at limit per window; up to burst may wait in line." },
    CONCURRENCY: {
      description: "At most limit requests in flight: an admitted check holds a lease (LimitDecision.lease) until releaseLease, or until the window passes if its holder never releases it.",
    },
  },
});

registerEnumType(ActionEnum, {
  name: "Action",
  valuesConfig: {
    REJECT: { description: "Over the limit: deny." },
    THROTTLE: { description: "Over the limit: admit after a delay (delayMs) while the queue has room; deny when it is full." },
    LOG_ONLY: { description: "Never deny; report what would have happened (shadow mode)." },
  },
});

registerEnumType(FailureModeEnum, {
  name: "FailureMode",
  valuesConfig: {
    OPEN: { description: "Counter store unreachable: allow." },
    CLOSED: { description: "Counter store unreachable: deny." },
    LOCAL: { description: "Counter store unreachable: decide with this instance's own in-memory counters." },
  },
});

registerEnumType(ReachEnum, {
  name: "Reach",
  valuesConfig: {
    REGIONAL: { description: "Each region (REGION) enforces the whole limit on its own counters." },
    GLOBAL: {
      description:
        "Every region shares the limit: each counts the others' usage, shipped every REGION_SYNC_MS, and may briefly admit more together by what they admitted meanwhile. FIXED_WINDOW and SLIDING_WINDOW_COUNTER only. Without REGION, as REGIONAL.",
    },
  },
});

registerEnumType(WindowUnitEnum, { name: "WindowUnit" });
registerEnumType(RuleChangeKindEnum, { name: "RuleChangeKind" });

registerEnumType(DecisionSourceEnum, {
  name: "DecisionSource",
  description: "Who made a decision.",
  valuesConfig: {
    COUNTER_STORE: { description: "The counter store (Redis, or this process's memory), in one atomic call for every rule that applies." },
    OVER_LIMIT_CACHE: {
      description:
        "This instance, without asking the counter store: a bucket of the request was already known to be over its limit until after now (a refusal only; it consumed nothing). A refused bucket reports the store's refusal that filled the cache, as read at its readAt; rules whose buckets were not read say so with consulted: false. Never for a dry run, which always asks the store.",
    },
    SCREENING: {
      description:
        "This instance, before any rule and without asking the counter store: an access list entry or a ban decided the request (see reason). No rule consumed anything or refused it; results is empty.",
    },
  },
});

registerEnumType(DecisionReasonCodeEnum, {
  name: "DecisionReasonCode",
  description: "Why a request was decided before its rules.",
  valuesConfig: {
    DENY_LISTED: { description: "An entry of the tenant's (or every tenant's) deny list matches the request: refused, no counter touched." },
    BANNED: { description: "A ban of one of the request's identifiers is in force: refused until it ends, no counter touched." },
    ALLOW_LISTED: { description: "An entry of the tenant's (or every tenant's) allow list matches the request: admitted, no rule counted it." },
  },
});

registerEnumType(InvalidationKindEnum, {
  name: "InvalidationKind",
  valuesConfig: {
    LISTENING: { description: "The first message of every subscription: what is published from now on reaches this subscriber." },
    RULE_CHANGED: { description: "A rule was created, updated or deleted: every bucket of it." },
    BUCKET_RESET: { description: "One bucket was reset (resetLimit)." },
    ALLOW_LISTED: { description: "An entry was added to the tenant's allow list (tenantId \"*\": every tenant's): any refusal of the tenant may admit now (ruleId and key null)." },
  },
});

export const OverrideMatchEnum = enumObject(OVERRIDE_MATCHES);

registerEnumType(OverrideMatchEnum, {
  name: "OverrideMatch",
  description: "How an override's identifier names the values it applies to.",
  valuesConfig: {
    EXACT: { description: "The value itself (for IP, an address; for API_KEY and CLIENT, the hash a bucket key shows). Beats every glob and CIDR block." },
    GLOB: { description: 'A glob: "*" is any run of characters ("*@acme.com"). The one with the most literal characters wins.' },
    CIDR: { description: 'For IP only: a block by its network address ("10.0.0.0/8"). The longest prefix wins.' },
  },
});

export const AccessListEnum = enumObject(ACCESS_LISTS);
export const ListEntryKindEnum = enumObject(LIST_ENTRY_KINDS);
export const ListEntryChangeKindEnum = enumObject(LIST_ENTRY_CHANGE_KINDS);

registerEnumType(AccessListEnum, {
  name: "AccessList",
  description: "Which of a tenant's access lists: checked before any rule (docs/access-lists.md).",
  valuesConfig: {
    DENY: { description: "Always refused (reason DENY_LISTED), before bans and the allow list; no counter is touched." },
    ALLOW: { description: "Always let through (reason ALLOW_LISTED) unless deny-listed or banned; no rule of the tenant counts it." },
  },
});

registerEnumType(ListEntryKindEnum, {
  name: "ListEntryKind",
  description: "Which identifier of a request an access list entry names.",
  valuesConfig: {
    IP: { description: 'An address or a CIDR block, IPv4 or IPv6, by its network address ("10.0.0.0/8"); an IPv4-mapped IPv6 request address matches its IPv4 entry.' },
    USER: { description: "A userId, exactly." },
    API_KEY: { description: 'An apiKey, stored only as "sha256:<digest>" (give the key or that form).' },
    USER_AGENT: { description: 'A userAgent glob ("*" any run of characters), matched without regard to case; stored in lower case.' },
  },
});

registerEnumType(ListEntryChangeKindEnum, { name: "ListEntryChangeKind" });
