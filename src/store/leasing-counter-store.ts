/**
 * Leased budgets for hot buckets: a bucket this instance checks more than
 * `hotChecksPerSecond` times a second is given a lease, units taken from the
 * counter store in one call, and its checks are admitted from the lease here,
 * without a round trip, until the lease is spent or expires; then the next.
 *
 * Exact, never over-admitting. A lease's units are counted in the store when
 * the lease is taken, so every other instance sees them as used, and this one
 * admits no more than it was granted. Using a unit later than it was counted
 * is never more permissive:
 *   FIXED_WINDOW, SLIDING_WINDOW_COUNTER  the units count in the window the lease
 *       was taken in, and the lease ends with that window: within it, a later
 *       use sees the same counts (the sliding counter's previous window weighs
 *       less as the window goes on, never more).
 *   TOKEN_BUCKET, LEAKY_BUCKET  the tokens were taken earlier than used, so
 *       the store's bucket owes them on top of what it really owes; that holds
 *       while it owes at least what the lease still holds. A bucket that would
 *       otherwise be full again stops refilling, while the store's debt keeps
 *       draining the lease's tokens away: from then on the lease's tokens
 *       would be admitted twice. So a meter's lease ends when the store's debt,
 *       draining at the rule's rate with nothing else taken, would fall to
 *       the lease's size: (what it owed before the lease) / rate after the
 *       grant. A meter being drawn down faster than it refills owes enough for
 *       its leases to last; one that is nearly full owes too little for any.
 * SLIDING_WINDOW_LOG (a unit is stamped with the time it is counted, and
 * leaves the window one window later), CONCURRENCY (a slot is freed by a
 * release, which a budget taken ahead would never see), THROTTLE (its wait depends on the
 * line) and LOG_ONLY buckets are never leased, nor is anything in a dry run,
 * which reads the store.
 *
 * What it costs: units leased and not used are counted without being
 * admitted, an under-admission. A lease takes at most a quarter of what the
 * bucket had left when it was taken (and about leaseMs of this instance's
 * traffic on it), so near its limit a bucket's leases shrink and then stop,
 * and its checks go to the store one by one again; what is left unused
 * expires with the window (a meter's unused tokens stay taken, and refill at
 * the rule's rate). Every instance together under-admits at most what their
 * unspent leases hold.
 *
 * All or nothing still. A check with a leased bucket and other buckets takes
 * its units from the lease first and sends the other buckets to the store;
 * when the store refuses, the lease gets its units back, so a denied request
 * consumes nothing anywhere.
 *
 * What a leased bucket reports: remaining is what the store had left when the
 * lease was taken plus what the lease still holds (what this instance knows,
 * other instances may have used some since), and the reset time is the
 * store's as of then. The decision's time is the store's clock, estimated
 * from the lease's reply: a duration is never computed from two clocks.
 *
 * A bucket reset through any instance drops its lease here (event-listeners.ts);
 * a rule changed takes new parameters, under which the old lease is never used.
 */

import { windowFrame, type LimitParams } from "../domain/algorithms/index.js";
import type { BucketOutcome } from "../domain/algorithms/index.js";
import { LruCache } from "../domain/lru-cache.js";
import type { LeasedBucket } from "../domain/lease.js";
import type { BucketRef, Clock, CounterCall, CounterReply, CounterStore, DecideOptions } from "../domain/ports.js";
import { noTelemetry, type Telemetry } from "../domain/telemetry.js";

export interface LeasingCounterStoreOptions {
  inner: CounterStore;
  clock: Clock;
  /** A bucket checked at least this many times in a second on this instance is leased. */
  hotChecksPerSecond: number;
  /** How much of this instance's traffic on a bucket one lease covers, in milliseconds of it. */
  leaseMs: number;
  /** The longest a lease lives, whatever its algorithm: how stale what a leased decision reports of the store may be. */
  maxLeaseMs?: number;
  /** Buckets whose rate this instance tracks; least recently checked forgotten first. */
  maxTracked?: number;
  telemetry?: Telemetry;
}

/** The longest a lease lives by default. */
export const MAX_LEASE_MS = 1000;
/** The share of what a bucket had left that one lease may take. */
const LEASE_SHARE_OF_REMAINING = 4;
/** A lease of fewer units saves no round trip worth its bookkeeping. */
const MIN_LEASE_UNITS = 2;
const LEASABLE_ALGORITHMS: ReadonlySet<LimitParams["algorithm"]> = new Set(["FIXED_WINDOW", "SLIDING_WINDOW_COUNTER", "TOKEN_BUCKET", "LEAKY_BUCKET"]);

interface Lease {
  /** Units still to admit. */
  units: number;
  /** Units of the last grant: once fewer than half of them are left, the next lease is taken, before this one runs out. */
  granted: number;
  /** When it ends by the store's clock: a later grant ending at the same time (the same window) adds to it. */
  endsAtStoreMs: number;
  /** What the store had left when it granted the lease (the lease's units not among them). */
  remainingAtGrant: number;
  /** The store's reset time for the bucket, as of the grant, by its clock. */
  resetAtMs: number;
  /** The store's clock minus this instance's, at the grant. */
  offsetMs: number;
  /** When the lease ends, by this instance's clock. */
  expiresAtMs: number;
}

interface Tracked {
  /** The rule's parameters the entry was made under: another rule version starts afresh. */
  params: LimitParams;
  second: number;
  /** Units checked in `second`, and in the second before. */
  units: number;
  unitsBefore: number;
  checks: number;
  checksBefore: number;
  /** What the store last said was left. */
  lastRemaining: number;
  lease: Lease | null;
  taking: boolean;
}

/** How one call goes: which of its buckets are admitted from a lease, and the call the store gets for the others. */
interface Plan {
  leased: (Lease | null)[];
  store: CounterCall | null;
}

export class LeasingCounterStore implements CounterStore {
  readonly description: string;
  private readonly tracked: LruCache<string, Tracked>;
  private readonly telemetry: Telemetry;
  /** Leases being taken, for close() and tests to wait for. */
  private readonly taking = new Set<Promise<void>>();

  constructor(private readonly options: LeasingCounterStoreOptions) {
    this.description = options.inner.description;
    this.tracked = new LruCache({ maxEntries: options.maxTracked ?? 100_000 });
    this.telemetry = options.telemetry ?? noTelemetry;
  }

  async decide(calls: readonly CounterCall[], options?: DecideOptions): Promise<CounterReply[]> {
    const nowMs = this.options.clock.now();
    const plans = calls.map((call) => this.plan(call, nowMs));
    // A loop, not flatMap, on this path of every check: Node 20 runs flat and flatMap about forty times slower than map (BENCHMARKS.md, "The server's instructions").
    const storeCalls: CounterCall[] = [];
    for (const plan of plans) if (plan.store !== null) storeCalls.push(plan.store);
    let replies: CounterReply[];
    try {
      replies = storeCalls.length === 0 ? [] : await this.options.inner.decide(storeCalls, options);
    } catch (error) {
      for (const [i, plan] of plans.entries()) giveBack(plan, calls[i]!.cost);
      throw error;
    }
    let next = 0;
    return plans.map((plan, i) => {
      const call = calls[i]!;
      const reply = plan.store === null ? null : replies[next++]!;
      if (reply !== null) this.learn(plan.store!, reply);
      if (plan.leased.every((lease) => lease === null)) return reply!;
      return this.combine(call, plan, reply, nowMs);
    });
  }

  /** Forgets a bucket's lease and rate (a reset through any instance), and resets it in the store. */
  async reset(ruleId: string, key: string): Promise<boolean> {
    this.forget(ruleId, key);
    return this.options.inner.reset(ruleId, key);
  }

  /** A CONCURRENCY rule's lease (not one of this store's budgets, which CONCURRENCY buckets never get): the inner store's. */
  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    return this.options.inner.releaseLease(lease, buckets);
  }

  /** Drops this instance's lease of a bucket: its units are no longer counted in the store. */
  forget(ruleId: string, key: string): void {
    this.tracked.delete(bucketId(ruleId, key));
  }

  /** Resolves once every lease being taken has been granted or refused. */
  async leasesTaken(): Promise<void> {
    await Promise.all([...this.taking]);
  }

  async close(): Promise<void> {
    await this.leasesTaken();
    await this.options.inner.close();
  }

  /** Counts the call's buckets toward their rates, and takes its units from the leases that hold enough. */
  private plan(call: CounterCall, nowMs: number): Plan {
    const leased = call.buckets.map((bucket) => {
      if (call.dryRun || !leasable(bucket)) return null;
      const tracked = this.track(bucket, call.cost, nowMs);
      const lease = tracked.lease;
      if (lease === null || nowMs >= lease.expiresAtMs || lease.units < call.cost) return null;
      lease.units -= call.cost;
      this.renew(bucket, tracked, nowMs);
      return lease;
    });
    const toStore = call.buckets.filter((_, i) => leased[i] === null);
    return { leased, store: toStore.length === 0 ? null : { ...call, buckets: toStore } };
  }

  /**
   * The reply of a call some of whose buckets a lease admitted: the store's
   * verdict on the others (none: admitted), the leases' units kept when it
   * admits and given back when it refuses.
   */
  private combine(call: CounterCall, plan: Plan, reply: CounterReply | null, nowMs: number): CounterReply {
    const allowed = reply === null || reply.allowed;
    if (!allowed) giveBack(plan, call.cost);
    else this.telemetry.leaseUsed(call.cost * plan.leased.filter((lease) => lease !== null).length);
    let fromStore = 0;
    const outcomes = plan.leased.map(
      (lease): BucketOutcome =>
        lease === null
          ? reply!.outcomes[fromStore++]!
          : { conforming: true, remaining: lease.remainingAtGrant + lease.units, resetAtMs: lease.resetAtMs, retryAfterMs: null, delayMs: 0 },
    );
    const firstLease = plan.leased.find((lease) => lease !== null)!;
    return { nowMs: reply?.nowMs ?? nowMs + firstLease.offsetMs, allowed, outcomes, ...(reply?.degraded ? { degraded: true } : {}) };
  }

  /** The tracked entry of a leasable bucket, its rate counted with this check. */
  private track(bucket: BucketRef, cost: number, nowMs: number): Tracked {
    const id = bucketId(bucket.ruleId, bucket.key);
    const second = Math.floor(nowMs / 1000);
    let tracked = this.tracked.get(id);
    if (tracked === undefined || tracked.params !== bucket.params) {
      tracked = { params: bucket.params, second, units: 0, unitsBefore: 0, checks: 0, checksBefore: 0, lastRemaining: 0, lease: null, taking: false };
      this.tracked.set(id, tracked);
    } else if (tracked.second !== second) {
      const justBefore = tracked.second === second - 1;
      tracked.unitsBefore = justBefore ? tracked.units : 0;
      tracked.checksBefore = justBefore ? tracked.checks : 0;
      tracked.units = 0;
      tracked.checks = 0;
      tracked.second = second;
    }
    tracked.units += cost;
    tracked.checks += 1;
    return tracked;
  }

  /** What the store said of the buckets it decided: what is left, and whether a hot one should take a lease now. */
  private learn(call: CounterCall, reply: CounterReply): void {
    if (reply.degraded || call.dryRun) return;
    call.buckets.forEach((bucket, i) => {
      if (!leasable(bucket)) return;
      const tracked = this.tracked.get(bucketId(bucket.ruleId, bucket.key));
      if (tracked === undefined || tracked.params !== bucket.params) return;
      tracked.lastRemaining = reply.outcomes[i]!.remaining;
      this.renew(bucket, tracked, this.options.clock.now());
    });
  }

  /**
   * Takes the next lease of a hot bucket when it has none it can use, or when
   * fewer than half of its last grant's units are left: the next one is then
   * on its way while this one still admits, so that a hot bucket's checks
   * need not go to the store while it comes.
   */
  private renew(bucket: BucketRef, tracked: Tracked, nowMs: number): void {
    if (tracked.taking || Math.max(tracked.checks, tracked.checksBefore) < this.options.hotChecksPerSecond) return;
    const lease = tracked.lease;
    if (lease !== null && nowMs < lease.expiresAtMs && lease.units * 2 >= lease.granted) return;
    const taking = this.takeLease(bucket, tracked).finally(() => this.taking.delete(taking));
    this.taking.add(taking);
  }

  /**
   * Takes a lease for a hot bucket: about leaseMs of this instance's units on
   * it, at most a quarter of what it had left, in one call of its own. The
   * lease starts when the store grants it, and joins what is left of the one
   * before when both end together (the same window; for a meter, when the
   * store's debt still covers them both: see the header); a refusal (the
   * bucket too full for it) or a fault leaves the bucket to the store.
   */
  private async takeLease(bucket: BucketRef, tracked: Tracked): Promise<void> {
    const { clock, leaseMs } = this.options;
    const perSecond = Math.max(tracked.units, tracked.unitsBefore);
    const units = Math.min(Math.ceil((perSecond * leaseMs) / 1000), Math.floor(tracked.lastRemaining / LEASE_SHARE_OF_REMAINING));
    if (units < MIN_LEASE_UNITS) return;
    tracked.taking = true;
    try {
      const sentAtMs = clock.now();
      const [reply] = await this.options.inner.decide([{ buckets: [bucket], cost: units, dryRun: false }]);
      const outcome = reply!.outcomes[0]!;
      if (!reply!.allowed || reply!.degraded) return;
      // Reset (or its rule changed) while the lease was on its way: the store may no longer count its units.
      if (this.tracked.get(bucketId(bucket.ruleId, bucket.key)) !== tracked) return;
      const grantedAtMs = clock.now();
      // The store's time is the reply's; this instance's, the middle of the round trip.
      const offsetMs = reply!.nowMs - Math.round((sentAtMs + grantedAtMs) / 2);
      const before = tracked.lease !== null && grantedAtMs < tracked.lease.expiresAtMs ? tracked.lease : null;
      const joined = before === null ? null : joinedEnd(bucket.params, before, units, reply!.nowMs, outcome.resetAtMs);
      const endsAtStoreMs = joined ?? leaseEndMs(bucket.params, units, reply!.nowMs, outcome.resetAtMs);
      tracked.lastRemaining = outcome.remaining;
      if (endsAtStoreMs <= reply!.nowMs) return;
      tracked.lease = {
        units: joined === null ? units : before!.units + units,
        granted: units,
        endsAtStoreMs,
        remainingAtGrant: outcome.remaining,
        resetAtMs: outcome.resetAtMs,
        offsetMs,
        // The store read its clock at some point of the round trip, at the earliest when the call was sent: its
        // clock is at most `reply.nowMs - sentAtMs` ahead of this one's, so the lease ends here before the store's
        // window (or debt) does, however the round trip was split. The middle of it could end half a round trip late.
        expiresAtMs: Math.min(endsAtStoreMs - (reply!.nowMs - sentAtMs), grantedAtMs + (this.options.maxLeaseMs ?? MAX_LEASE_MS)),
      };
      this.telemetry.leaseTaken(units);
    } catch {
      // The store could not be asked: the bucket's checks go to it (and its failure mode) one by one.
    } finally {
      tracked.taking = false;
    }
  }
}

function leasable(bucket: BucketRef): boolean {
  return bucket.params.action === "REJECT" && LEASABLE_ALGORITHMS.has(bucket.params.algorithm);
}

/**
 * When a lease of `units` granted at `grantedAtMs` must end, by the store's
 * clock (see the header): a windowed rule's at the end of the window it
 * counted them in; a meter's once the store's debt, which drains away at
 * `limit` per window and is all gone at `resetAtMs`, would owe no more than
 * the lease's units.
 */
function leaseEndMs(params: LimitParams, units: number, grantedAtMs: number, resetAtMs: number): number {
  if (params.algorithm === "FIXED_WINDOW" || params.algorithm === "SLIDING_WINDOW_COUNTER") return windowFrame(grantedAtMs, params).endMs;
  return resetAtMs - Math.ceil((units * params.windowMs) / params.limit);
}

/** When a new grant of `units` and what is left of the lease before end together, or null when they cannot be one lease. */
function joinedEnd(params: LimitParams, before: Lease, units: number, grantedAtMs: number, resetAtMs: number): number | null {
  const end = leaseEndMs(params, before.units + units, grantedAtMs, resetAtMs);
  if (params.algorithm === "FIXED_WINDOW" || params.algorithm === "SLIDING_WINDOW_COUNTER") return end === before.endsAtStoreMs ? end : null;
  return end > grantedAtMs ? end : null;
}

function giveBack(plan: Plan, cost: number): void {
  for (const lease of plan.leased) if (lease !== null) lease.units += cost;
}

function bucketId(ruleId: string, key: string): string {
  return `${ruleId}\u0000${key}`;
}
