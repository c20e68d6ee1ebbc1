/**
 * The ports: what the engine needs from the outside world. Redis, the
 * in-process store and Prisma implement them; nothing here knows they exist.
 */

import type { BucketOutcome, LimitParams } from "./algorithms/index.js";
import type { Principal, Role } from "./access.js";
import type { BucketReset, KeyRevocation, NearLimitEvent, RuleChange, ThrottleEvent } from "./events.js";
import type { ChangeOrigin, RuleRevision } from "./revision.js";
import type { FailureMode, Rule, RuleSpec } from "./rule.js";

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

export interface CounterStore {
  /** A short name for logs and the start-up line: "redis", "memory". */
  readonly description: string;
  /**
   * Decides each call atomically; the calls are sent together and applied in
   * order. A store that cannot decide (unreachable, too slow) throws: a refusal
   * is a reply, a fault is an error, never the other way round.
   */
  decide(calls: readonly CounterCall[]): Promise<CounterReply[]>;
  /** Forgets one bucket; true when there was something to forget. */
  reset(ruleId: string, key: string): Promise<boolean>;
  close(): Promise<void>;
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
  close(): Promise<void>;
}

/** One write of a batch that is applied all together or not at all. */
export type RuleWrite = { kind: "create"; id: string; spec: RuleSpec } | { kind: "update"; id: string; spec: RuleSpec; version: number };

/** Rules and their history. Every write records its revision in the same transaction. */
export interface RuleRepository {
  list(): Promise<Rule[]>;
  get(id: string): Promise<Rule | null>;
  /** Fails with ConflictError when the tenant already has a rule of that name. */
  create(id: string, spec: RuleSpec, origin?: ChangeOrigin): Promise<Rule>;
  /** Writes the rule if its version is still `version`; null when it is not (or the rule is gone). */
  update(id: string, spec: RuleSpec, version: number, origin?: ChangeOrigin): Promise<Rule | null>;
  /** Deletes the rule (its history stays); returns it as it was, or null when it did not exist. */
  delete(id: string, origin?: ChangeOrigin): Promise<Rule | null>;
  /**
   * Applies every write in one transaction, or none: fails with ConflictError
   * when an updated rule is no longer at its version or a created rule's name
   * has been taken meanwhile. Returns the written rules in the writes' order.
   */
  writeAll(writes: readonly RuleWrite[], origin?: ChangeOrigin): Promise<Rule[]>;
  /** Every revision of the rule, oldest first; empty when the id never existed. */
  history(id: string): Promise<RuleRevision[]>;
  close(): Promise<void>;
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

/** A last-known-good copy of what the database holds, on local disk, for when the database is down. */
export interface Snapshot<T> {
  read(): Promise<{ items: T[]; savedAt: Date } | null>;
  write(items: readonly T[]): Promise<void>;
}

/** The rules, so that the service can start while the rule database is down. */
export type RuleSnapshot = Snapshot<Rule>;

/** Every key's credential (secret hashes only), so that known keys authenticate while the database is down. */
export type ApiKeySnapshot = Snapshot<ApiKeyCredential>;

export type Unsubscribe = () => void;

/**
 * Live events: rule changes (to keep every instance's rule book current),
 * bucket resets (so that no instance keeps refusing a bucket from memory once
 * it is reset), key revocations (so that no instance keeps accepting a revoked
 * key from memory, or keeps its sockets open), throttle and near-limit events
 * (for dashboards). Every
 * instance's listeners hear what any instance publishes, its own events
 * included.
 */
export interface EventBus {
  publishRuleChange(change: RuleChange): Promise<void>;
  publishBucketReset(reset: BucketReset): Promise<void>;
  publishKeyRevocation(revocation: KeyRevocation): Promise<void>;
  publishThrottle(event: ThrottleEvent): void;
  publishNearLimit(event: NearLimitEvent): void;
  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe;
  onBucketReset(listener: (reset: BucketReset) => void): Unsubscribe;
  onKeyRevocation(listener: (revocation: KeyRevocation) => void): Unsubscribe;
  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe;
  onNearLimit(listener: (event: NearLimitEvent) => void): Unsubscribe;
  close(): Promise<void>;
}
