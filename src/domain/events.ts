import type { ListEntryChange } from "./access-list.js";
import type { Ban } from "./ban.js";
import type { Override } from "./override.js";
import type { Action, Rule } from "./rule.js";

/** What throttle and near-limit events say alike: which rule, which bucket, which request, and how many it stands for. */
export interface LimitEvent {
  at: Date;
  tenantId: string;
  ruleId: string;
  ruleName: string;
  key: string;
  resource: string | null;
  method: string | null;
  action: Action;
  limit: number;
  /** The rule is LOG_ONLY: a refusal it reports let the request through all the same. */
  shadow: boolean;
  /** How many requests this event stands for (events are coalesced under a flood). */
  count: number;
}

/** Refusals (or, for LOG_ONLY rules, refusals that would have happened), as dashboards see them. */
export interface ThrottleEvent extends LimitEvent {
  retryAfter: number | null;
}

/** Admitted requests that left their bucket with under a tenth of its limit (see isNearLimit). */
export interface NearLimitEvent extends LimitEvent {
  /** What the bucket had left after the last request this event stands for. */
  remaining: number;
}

/** A bucket forgotten by resetLimit: every instance drops what it remembers of it. */
export interface BucketReset {
  ruleId: string;
  /** The rule's tenant, so that only that tenant's subscribers hear of it. */
  tenantId: string;
  key: string;
}

/**
 * What makes a remembered decision stale, as the clients that cache refusals
 * hear it (the `invalidations` subscription): a rule changed (every bucket of
 * it) or one bucket was reset. LISTENING is the first message of every
 * subscription: what is published from then on reaches the subscriber.
 */
export type InvalidationKind = "LISTENING" | "RULE_CHANGED" | "BUCKET_RESET" | "ALLOW_LISTED";

export const INVALIDATION_KINDS: readonly InvalidationKind[] = ["LISTENING", "RULE_CHANGED", "BUCKET_RESET", "ALLOW_LISTED"];

export interface Invalidation {
  kind: InvalidationKind;
  /** Null for LISTENING. */
  tenantId: string | null;
  ruleId: string | null;
  /** The bucket, for BUCKET_RESET; null: every bucket of the rule. */
  key: string | null;
  at: Date;
}

/** An API key revoked: every instance stops accepting it at once, and closes the sockets it holds. */
export interface KeyRevocation {
  keyId: string;
  at: Date;
}

export type RuleChangeKind = "CREATED" | "UPDATED" | "DELETED";

export const RULE_CHANGE_KINDS: readonly RuleChangeKind[] = ["CREATED", "UPDATED", "DELETED"];

export interface RuleChange {
  kind: RuleChangeKind;
  ruleId: string;
  tenantId: string;
  version: number;
  rule: Rule | null;
  at: Date;
  /**
   * Set when the change is to one of the rule's overrides (the rule's
   * version grows by one, its fields stay): the override as written, or
   * null for a deletion. Its version is the change's.
   */
  override?: { id: string; value: Override | null };
}

export const BAN_EVENT_KINDS = ["BANNED", "UNBANNED"] as const;
export type BanEventKind = (typeof BAN_EVENT_KINDS)[number];

/** A ban placed (or replaced) or lifted: every instance's ban screen takes it at once; dashboards show it. */
export interface BanEvent {
  kind: BanEventKind;
  tenantId: string;
  /** The rule whose autoBan placed it; null for a ban placed by hand, and for every lifting. */
  ruleId: string | null;
  ban: Ban;
  at: Date;
}

/**
 * Every event the bus carries, by topic: rule changes (to keep every
 * instance's rule book current), bucket resets (so that no instance keeps
 * refusing a bucket from memory once it is reset), key revocations (so that
 * no instance keeps accepting a revoked key from memory, or keeps its sockets
 * open), access list changes (to keep every instance's access list index
 * current), throttle and near-limit events (for dashboards), bans (to keep
 * every instance's ban screen current, and for dashboards).
 */
export interface EventMap {
  ruleChange: RuleChange;
  bucketReset: BucketReset;
  keyRevocation: KeyRevocation;
  accessListChange: ListEntryChange;
  throttle: ThrottleEvent;
  nearLimit: NearLimitEvent;
  ban: BanEvent;
}

export type EventTopic = keyof EventMap;

export type EventListener<K extends EventTopic> = (event: EventMap[K]) => void;
