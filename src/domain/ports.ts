/**
 * The ports: what the engine needs from the outside world. Redis, the
 * in-process store and Prisma implement them; nothing here knows they exist.
 */

import type { BucketOutcome, LimitParams } from "./algorithms/index.js";
import type { RuleChange, ThrottleEvent } from "./events.js";
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

export interface RuleRepository {
  list(): Promise<Rule[]>;
  get(id: string): Promise<Rule | null>;
  /** Fails with ConflictError when the tenant already has a rule of that name. */
  create(id: string, spec: RuleSpec): Promise<Rule>;
  /** Writes the rule if its version is still `version`; null when it is not (or the rule is gone). */
  update(id: string, spec: RuleSpec, version: number): Promise<Rule | null>;
  /** Deletes the rule; returns it as it was, or null when it did not exist. */
  delete(id: string): Promise<Rule | null>;
  close(): Promise<void>;
}

/** A copy of the rules on local disk, so that the service can start while the rule database is down. */
export interface RuleSnapshot {
  read(): Promise<{ rules: Rule[]; savedAt: Date } | null>;
  write(rules: readonly Rule[]): Promise<void>;
}

export type Unsubscribe = () => void;

/** Live events: rule changes (to keep every instance's rule cache current) and throttle events (for dashboards). */
export interface EventBus {
  publishRuleChange(change: RuleChange): Promise<void>;
  publishThrottle(event: ThrottleEvent): void;
  onRuleChange(listener: (change: RuleChange) => void): Unsubscribe;
  onThrottle(listener: (event: ThrottleEvent) => void): Unsubscribe;
  close(): Promise<void>;
}
