/**
 * The ports: what the engine needs from the outside world. Redis, the
 * in-process store and Prisma implement them; nothing here knows they exist.
 */

import type { BucketOutcome, LimitParams } from "./algorithms/index.js";
import type { AccessList, ListEntry, ListEntryChange, ListEntrySpec } from "./access-list.js";
import type { Ban, BanSpec } from "./ban.js";
import type { Principal, Role } from "./access.js";
import type { EventListener, EventMap, EventTopic } from "./events.js";
import type { ChangeOrigin, RuleRevision } from "./revision.js";
import type { LeasedBucket } from "./lease.js";
import type { Override, OverrideSpec } from "./override.js";
import type { FailureMode, Rule, RuleSpec } from "./rule.js";
import type { BucketUsage, UsageBatch, UsageCounts } from "./usage.js";

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** One bucket of one rule, as a counter store sees it. */
export interface BucketRef {
  ruleId: string;
  key: string;
  params: LimitParams;
  /** How to decide this bucket when the store cannot be reached (default OPEN, as for rules). */
  failureMode?: FailureMode;
}

/** One request against all the buckets that apply to it: decided atomically. */
export interface CounterCall {
  buckets: BucketRef[];
  cost: number;
  dryRun: boolean;
  /**
   * The slot's name (lease.ts memberOf) each CONCURRENCY bucket holds when
   * the call is admitted; required when the call has one.
   */
  lease?: string;
}

/** The call's lease, which a call with a CONCURRENCY bucket must name. */
export function leaseOf(call: CounterCall): string {
  if (call.lease === undefined) throw new Error("a call with a CONCURRENCY bucket must name its lease");
  return call.lease;
}

export interface CounterReply {
  /** The store's clock when it decided (Redis TIME for Redis). */
  nowMs: number;
  allowed: boolean;
  /** In the order of the call's buckets. */
  outcomes: BucketOutcome[];
  /** Decided without the store, by each rule's failureMode. */
  degraded?: boolean;
}

/** What a caller of `decide` asks beyond the calls themselves. */
export interface DecideOptions {
  /**
   * How long the caller will wait for the answer, in milliseconds (a gRPC
   * caller's deadline): a store that guards itself with a deadline decides by
   * failure mode rather than answer after it. Absent: its own deadline alone.
   */
  budgetMs?: number;
}

export interface CounterStore {
  /** A short name for logs and the start-up line: "redis", "memory". */
  readonly description: string;
  /**
   * Decides each call atomically; the calls are sent together and applied in
   * order. A store that cannot decide (unreachable, too slow) throws: a refusal
   * is a reply, a fault is an error, never the other way round.
   */
  decide(calls: readonly CounterCall[], options?: DecideOptions): Promise<CounterReply[]>;
  /** Forgets one bucket; true when there was something to forget. */
  reset(ruleId: string, key: string): Promise<boolean>;
  /** Frees the slot named `lease` in each CONCURRENCY bucket; true when any bucket still held it. */
  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean>;
  close(): Promise<void>;
}

/** Why a call of `decideEach` went undecided: its shard's error, or a missed deadline. */
export interface CallFailure {
  error: unknown;
}

/**
 * A counter store spread over shards that can fail one at a time: the masters
 * of a Redis Cluster (one Redis, or a Sentinel group's master, is a single
 * shard). Whoever calls it can then keep a circuit breaker per shard, so that
 * a lost shard holds back only the calls whose buckets live on it.
 */
export interface ShardedCounterStore extends CounterStore {
  /** The shard that holds a bucket now (a master's "host:port"), as far as the store knows the topology. */
  shardOf(ruleId: string, key: string): string;
  /**
   * Calls `listener` with every shard there is, each time the store learns
   * the topology anew (a cluster client refreshing its slots, as it does
   * after a failover); returns how to stop.
   */
  watchShards(listener: (shards: readonly string[]) => void): Unsubscribe;
  /**
   * Decides the calls as `decide` does, except that a call fails on its own:
   * a call whose commands all answer within `deadlineMs` gets its reply even
   * when other calls of the batch fail, and a failed one gets its error.
   * `failedShards` names every shard that answered a command with an error or
   * not within the deadline.
   */
  decideEach(calls: readonly CounterCall[], deadlineMs: number): Promise<{ results: (CounterReply | CallFailure)[]; failedShards: ReadonlySet<string> }>;
}

/** A sharded store's `decide`: every call decided by decideEach without a deadline, or the first failure thrown (after every other call was decided or failed on its own). */
export async function decideAllOrThrow(store: ShardedCounterStore, calls: readonly CounterCall[]): Promise<CounterReply[]> {
  const { results } = await store.decideEach(calls, Number.POSITIVE_INFINITY);
  const failed = results.find((r): r is CallFailure => "error" in r);
  if (failed) throw failed.error;
  return results as CounterReply[];
}

/**
 * Counters this process holds itself, decided without a round trip: what a
 * LOCAL rule falls back on while the shared store is unreachable.
 */
export interface LocalCounterStore {
  /**
   * Decides one call at once. With `refusedElsewhere`, a rule decided outside
   * this store already refuses the request: nothing is counted, and the
   * buckets are reported as they stand.
   */
  decideOne(call: CounterCall, refusedElsewhere?: boolean): CounterReply;
  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean>;
  close(): Promise<void>;
}

/** One write of a batch that is applied all together or not at all. */
export type RuleWrite = { kind: "create"; id: string; spec: RuleSpec } | { kind: "update"; id: string; spec: RuleSpec; version: number };

/** How many rules the writes create in each tenant (an update never moves a rule to another tenant). */
export function creationsByTenant(writes: readonly RuleWrite[]): Map<string, number> {
  const creations = new Map<string, number>();
  for (const write of writes) if (write.kind === "create") creations.set(write.spec.tenantId, (creations.get(write.spec.tenantId) ?? 0) + 1);
  return creations;
}

/**
 * Rules and their history. Every write records its revision in the same
 * transaction. Writes that create rules take the most rules a tenant may have
 * (none given: no limit) and fail with RuleQuotaError, writing nothing, when
 * a tenant would have more afterwards; the count is exact however many
 * writers (instances) create rules at once.
 */
export interface RuleRepository {
  list(): Promise<Rule[]>;
  get(id: string): Promise<Rule | null>;
  /** Fails with ConflictError when the tenant already has a rule of that name. */
  create(id: string, spec: RuleSpec, origin?: ChangeOrigin, maxRulesPerTenant?: number): Promise<Rule>;
  /** Writes the rule if its version is still `version`; null when it is not (or the rule is gone). */
  update(id: string, spec: RuleSpec, version: number, origin?: ChangeOrigin): Promise<Rule | null>;
  /** Deletes the rule (its history stays); returns it as it was, or null when it did not exist. */
  delete(id: string, origin?: ChangeOrigin): Promise<Rule | null>;
  /**
   * Applies every write in one transaction, or none: fails with ConflictError
   * when an updated rule is no longer at its version or a created rule's name
   * has been taken meanwhile. Returns the written rules in the writes' order.
   */
  writeAll(writes: readonly RuleWrite[], origin?: ChangeOrigin, maxRulesPerTenant?: number): Promise<Rule[]>;
  /** Every revision of the rule, oldest first; empty when the id never existed. */
  history(id: string): Promise<RuleRevision[]>;
  /**
   * Writes the override (replacing the rule's override of the same target,
   * match and identifier, whose id it then keeps), takes the rule to its
   * next version and records the revision, in one transaction; null when
   * the rule is gone.
   */
  setOverride(id: string, spec: OverrideSpec, origin?: ChangeOrigin): Promise<OverrideWrite | null>;
  /** Deletes the override, taking its rule to its next version; null when there is no such override. */
  deleteOverride(id: string, origin?: ChangeOrigin): Promise<OverrideWrite | null>;
  getOverride(id: string): Promise<Override | null>;
  /** The overrides not expired by now, of every rule. */
  listOverrides(): Promise<Override[]>;
  /**
   * A text that differs once a rule or an override has been written since it
   * was read (each write records a revision in the same transaction), read
   * without reading the rules: the periodic reload reloads only when it has
   * changed.
   */
  changeMark(): Promise<string>;
  /** Up to `first` overrides of the rule, by id, after the id `after`. */
  pageOverrides(ruleId: string, first: number, after: string | null): Promise<Override[]>;
  close(): Promise<void>;
}

/** The most entries a tenant may hold, and the argument a refusal names (the tenantId that asked). */
export interface ListQuota {
  maxPerTenant: number;
  field: string;
}

/**
 * Access list entries and their history (domain/access-list.ts). Every
 * addition and removal records its change in the same transaction.
 */
export interface AccessListRepository {
  /** Every entry of every tenant: what each instance screens with. */
  list(): Promise<ListEntry[]>;
  /** One tenant's entries of one list (both lists for null), oldest first. */
  listOf(tenantId: string, list: AccessList | null): Promise<ListEntry[]>;
  get(id: string): Promise<ListEntry | null>;
  /**
   * Fails with ConflictError when the list already holds the value (of that
   * kind), and with ValidationError on the quota's field when the tenant
   * already holds its most entries (exact however many instances add at once).
   */
  add(id: string, spec: ListEntrySpec, actor: string, quota: ListQuota): Promise<ListEntry>;
  /** Removes the entry; returns it as it was, or null when it did not exist. */
  remove(id: string, actor: string): Promise<ListEntry | null>;
  /** A tenant's additions and removals, oldest first. */
  history(tenantId: string): Promise<ListEntryChange[]>;
}

/** An override written or deleted, and its rule at the version that change took it to. */
export interface OverrideWrite {
  rule: Rule;
  override: Override;
}

export interface ApiKey {
  id: string;
  tenantId: string;
  role: Role;
  name: string;
  createdAt: Date;
  revokedAt: Date | null;
  /** The key that created this one ("bootstrap" for ADMIN_TOKEN). */
  createdBy: string;
}

/** What authenticating needs of a key: the sha256 of its secret (hex), who it is, and whether it is revoked. */
export interface ApiKeyCredential {
  secretHash: string;
  principal: Principal;
  revokedAt: Date | null;
}

export interface ApiKeyRepository {
  create(key: ApiKey, secretHash: string): Promise<ApiKey>;
  get(id: string): Promise<ApiKey | null>;
  findBySecretHash(secretHash: string): Promise<ApiKey | null>;
  /** Every key's credential, revoked ones included: the last-known-good copy authentication falls back on. */
  credentials(): Promise<ApiKeyCredential[]>;
  /** Every key of a tenant, or of every tenant for null; newest first. */
  list(tenantId: string | null): Promise<ApiKey[]>;
  /** Marks the key revoked (once); returns it, or null when there is no such key. */
  revoke(id: string, at: Date): Promise<ApiKey | null>;
}

/**
 * Bans (domain/ban.ts): at most one per tenant, dimension and value, however
 * many instances ban it at once.
 */
export interface BanRepository {
  /**
   * Stores the ban, or replaces the end, note and author of the tenant's ban
   * of that dimension and value (keeping its id and so one ban); returns it as stored.
   */
  put(id: string, spec: BanSpec, createdBy: string, createdAt: Date): Promise<Ban>;
  get(id: string): Promise<Ban | null>;
  /** Deletes the ban; returns it as it was, or null when there was none. */
  delete(id: string): Promise<Ban | null>;
  /** The bans not ended by `now`, of one tenant or (null) of every tenant, by tenant, dimension and value. */
  live(tenantId: string | null, now: Date): Promise<Ban[]>;
}

/**
 * Refusals of one bucket counted over a period, by every instance together
 * (Redis with Redis; this process's memory embedded): what a rule's autoBan
 * counts. The period is fixed from the first refusal it counts.
 */
export interface RefusalCounter {
  /** Counts one refusal under `id`; the count of its period, this one included, which no two calls ever both see. */
  count(id: string, periodMs: number): Promise<number>;
}

/** A last-known-good copy of what the database holds, on local disk, for when the database is down. */
export interface Snapshot<T> {
  read(): Promise<{ items: T[]; savedAt: Date } | null>;
  write(items: readonly T[]): Promise<void>;
}

/** The rules, so that the service can start while the rule database is down. */
export type RuleSnapshot = Snapshot<Rule>;

/** Every key's credential (secret hashes only), so that known keys authenticate while the database is down. */
export type ApiKeySnapshot = Snapshot<ApiKeyCredential>;

/** Every access list entry, so that an instance starting while the database is down still enforces them. */
export type AccessListSnapshot = Snapshot<ListEntry>;

/** The live bans, likewise. */
export type BanSnapshot = Snapshot<Ban>;

export type Unsubscribe = () => void;

/**
 * Live events (see EventMap). Every instance's listeners hear what any
 * instance publishes, its own events included.
 */
export interface EventBus {
  /**
   * Delivers the event to this instance's listeners before it returns
   * (unless the bus coalesces it: see CoalescingEventBus), and resolves once
   * it is handed to the other instances. It never rejects: a
   * hand-over that failed is the bus's to report, since what the event tells
   * is already done (stored, revoked, reset) and the other instances make up
   * for a lost event (see RedisEventBus). Throttle and near-limit events are
   * published without waiting (`void`): a check never waits for a dashboard.
   */
  publish<K extends EventTopic>(topic: K, event: EventMap[K]): Promise<void>;
  subscribe<K extends EventTopic>(topic: K, listener: EventListener<K>): Unsubscribe;
  close(): Promise<void>;
}

/**
 * Usage counts of every instance, per minute (see src/domain/usage.ts): each
 * instance adds what it counted since its last batch, and reads see the sum.
 * Reads name the request tenant whose traffic they sum, or null for every
 * tenant's, so that a tenant never sees another's use of a "*" rule.
 */
export interface UsageStore {
  /** Adds one instance's counts; minutes older than USAGE_RETENTION_MS before the batch are forgotten. */
  add(batch: UsageBatch): Promise<void>;
  /** The rule's counts in each of `minutes` (minute starts), in their order; zeros for a minute without any. */
  ruleUsage(ruleId: string, tenantId: string | null, minutes: readonly number[]): Promise<UsageCounts[]>;
  /** The buckets refused most over `minutes` (refusals summed), most first; at most `limit`. */
  topBuckets(tenantId: string | null, minutes: readonly number[], limit: number): Promise<BucketUsage[]>;
  /** How many instances added a batch at or after `sinceMs`. */
  instancesSince(sinceMs: number): Promise<number>;
}
