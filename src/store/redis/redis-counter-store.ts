/**
 * Counters in Redis: one Redis, a Redis Sentinel group, or a Redis Cluster.
 * This class only translates calls into runs of lua/decide.lua and replies
 * into outcomes; the deciding and the combining of rules are the script's and
 * the domain's.
 *
 * A call whose buckets all live in one Redis Cluster slot (and every call on
 * one Redis) is one FCALL of decide.lua carrying every rule of the request,
 * decided atomically. A call whose buckets span slots is decided in two steps, so
 * that a denied request still consumes nothing:
 *   reserve  every slot decides its own rules and, if they all conform, takes
 *            their units, replying each rule's verdict and a receipt of what
 *            it took; the verdicts are combined by the domain's `combine`,
 *            exactly as one call would combine them.
 *   release  when the combined request is denied (or a slot failed), every
 *            slot that took units gives them back by its receipts.
 * Between the two, the reserved units count: other requests see a bucket
 * fuller than it will be, never emptier. If this process dies in between, the
 * units stay counted until they would have left the window had the request
 * been admitted (docs/redis-cluster.md): an over-count, never an
 * over-admission.
 *
 * Several calls (a batch, or the checks of one GraphQL operation) go out
 * together: one round trip for all reserves and decisions, one more for the
 * releases when there are any. Each call succeeds or fails on its own
 * (decideEach): a Redis Cluster master that fails, or does not answer within
 * the deadline, fails only the calls with a bucket on it, and is named as the
 * failed shard, so that the caller can keep a circuit breaker per master.
 */

import { ReplyError, type Cluster, type Redis } from "ioredis";
import { combine, type BucketOutcome, type LimitParams, type Verdict } from "../../domain/algorithms/index.js";
import type { LeasedBucket } from "../../domain/lease.js";
import { decideAllOrThrow, type BucketRef, type CallFailure, type Clock, type CounterCall, type CounterReply, type ShardedCounterStore, type Unsubscribe } from "../../domain/ports.js";
import type { KeyLayout } from "./key-layout.js";
import { MODE, RELEASE_OUTCOMES, type Mode } from "./script-codes.js";
import { decideArgs, decisionNumbers, registerScripts, specOf, type ScriptArgs, type ScriptReply, type ScriptedRedis } from "./scripts.js";

export interface RedisCounterStoreOptions {
  layout: KeyLayout;
  /** Tests pin time through the script's ARGV; in service the script reads Redis TIME. */
  clock?: Clock;
  /**
   * Told when giving back a denied request's reservation failed: the decision
   * stands, and `units` stay counted in that slot until they expire.
   */
  onReleaseFailed?: (error: unknown, units: number) => void;
}

/** The indexes (in the call) of the buckets that live in one slot, and the shard (master) that serves the slot. */
interface Part {
  buckets: number[];
  shard: string;
}

/** What one slot took for a call, to be given back if the call is not admitted. */
interface Reservation {
  call: CounterCall;
  part: Part;
  receipts: string[];
}

/** One run of decide.lua, and the shard it goes to. */
interface Command {
  args: ScriptArgs;
  shard: string;
}

/** A command's answer; one that missed the deadline carries the answer still to come. */
type Settled = { reply: ScriptReply } | { error: unknown; late?: Promise<Settled> };

/** The shard of slots the client has not learnt yet (before it first reaches the cluster). */
export const UNKNOWN_SHARD = "unknown";

interface Decided {
  reply: CounterReply;
  reservations: Reservation[];
}

interface Failed {
  error: unknown;
  reservations: Reservation[];
}

export class RedisCounterStore implements ShardedCounterStore {
  readonly description: string;
  private readonly redis: ScriptedRedis;
  /** One Redis ("host:port"), or a Sentinel group ("sentinel:<master name>": its master moves, the group stays): the only shard. */
  private readonly singleShard: string;
  private readonly layout: KeyLayout;
  private readonly clock: Clock | undefined;
  private readonly onReleaseFailed: (error: unknown, units: number) => void;
  private readonly shardWatchers = new Set<(shards: readonly string[]) => void>();

  constructor(client: Redis | Cluster, options: RedisCounterStoreOptions) {
    if (client.isCluster && client.options.enableAutoPipelining) {
      // ioredis groups an auto-pipelined script by its first argument, which
      // for decide.lua is the key count, not a key: commands for different
      // nodes land in one pipeline and fail (seen with ioredis 5.11).
      throw new Error("RedisCounterStore needs a Cluster client without enableAutoPipelining");
    }
    this.redis = registerScripts(client);
    this.layout = options.layout;
    this.clock = options.clock;
    this.onReleaseFailed = options.onReleaseFailed ?? (() => undefined);
    this.description = client.isCluster ? "redis cluster" : "redis";
    const { host, port, sentinels, name } = client.options as Redis["options"];
    // Never consulted on a cluster, whose shards are its masters.
    this.singleShard = sentinels ? `sentinel:${name}` : `${host}:${port}`;
    // ioredis refreshes a cluster's slots after MOVED and after losing a node.
    if (client.isCluster) client.on("refresh", () => this.shardsChanged());
  }

  decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    return decideAllOrThrow(this, calls);
  }

  async decideEach(calls: readonly CounterCall[], deadlineMs: number): Promise<{ results: (CounterReply | CallFailure)[]; failedShards: ReadonlySet<string> }> {
    const deadline = new Deadline(deadlineMs);
    const failedShards = new Set<string>();
    try {
      const plans = calls.map((call) => ({ call, parts: this.partsOf(call) }));
      // Loops, not flatMap, on this path of every check: Node 20 runs flat and flatMap about forty times slower than map (BENCHMARKS.md, "The server's instructions").
      const first: Command[] = [];
      for (const { call, parts } of plans) {
        const mode = call.dryRun ? MODE.DRY_RUN : MODE.DECIDE;
        if (parts.length === 1) first.push(this.command(call, parts[0]!, mode));
        else for (const part of parts) first.push(this.command(call, part, mode | MODE.RESERVE));
      }
      const settled = await this.send(first, deadline);
      settled.forEach((s, i) => {
        if ("error" in s && failsTheShard(s.error)) failedShards.add(first[i]!.shard);
      });
      let next = 0;
      const results = plans.map(({ call, parts }): Decided | Failed => {
        const mine = settled.slice(next, (next += parts.length));
        if (parts.length > 1) return combineSlots(call, parts, mine, (reservation) => this.release([reservation], NO_DEADLINE, new Set()));
        const only = mine[0]!;
        return "error" in only ? { error: only.error, reservations: [] } : { reply: parseDecision(only.reply), reservations: [] };
      });
      // A failed call admits nothing, so what its slots took goes back; so
      // does what a denied call took.
      const givenBack: Reservation[] = [];
      for (const r of results) if ("error" in r || !r.reply.allowed) givenBack.push(...r.reservations);
      await this.release(givenBack, deadline, failedShards);
      return { results: results.map((r) => ("error" in r ? { error: r.error } : r.reply)), failedShards };
    } finally {
      deadline.cancel();
    }
  }

  /** Each bucket's own state, as decide.lua's receipts write it ("" where it has none): what this region ships to the others. */
  states(buckets: readonly BucketRef[]): Promise<string[]> {
    const now = this.clock ? this.clock.now() : "";
    return Promise.all(
      buckets.map((bucket) => {
        const field = this.layout.field(bucket.key);
        const { pageA, pageB } = this.layout.keysOf(bucket.ruleId, field);
        return this.redis.floodgateState(pageA, pageB, now, specOf(bucket.params, now === "" ? null : now), field);
      }),
    );
  }

  /** Keeps other regions' states of buckets here, as the copies decide.lua adds to the buckets' own counts (merge.lua). */
  async mergeCopies(copies: readonly { bucket: BucketRef; region: string; state: string }[]): Promise<void> {
    const now = this.clock ? this.clock.now() : "";
    await Promise.all(
      copies.map(({ bucket, region, state }) => {
        const field = this.layout.field(bucket.key);
        const { pageA, pageB } = this.layout.keysOf(bucket.ruleId, field);
        return this.redis.floodgateMerge(pageA, pageB, now, specOf(bucket.params, now === "" ? null : now), field, region, state);
      }),
    );
  }

  shardOf(ruleId: string, key: string): string {
    return this.redis.isCluster ? this.shardOfSlot(this.layout.slotOf(ruleId, this.layout.field(key))) : this.singleShard;
  }

  watchShards(listener: (shards: readonly string[]) => void): Unsubscribe {
    this.shardWatchers.add(listener);
    return () => this.shardWatchers.delete(listener);
  }

  /**
   * decide.lua's release mode with the lease as every bucket's receipt: one
   * command per slot, all sent at once. A fault is thrown: the caller learns
   * the lease may still be held (it expires with its window all the same).
   */
  async releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    const call: CounterCall = { buckets: buckets.map(({ ruleId, key }) => ({ ruleId, key, params: LEASE_RELEASE_PARAMS })), cost: 1, dryRun: false, lease };
    const commands = this.partsOf(call).map((part): Command => {
      const { args, shard } = this.command(call, part, MODE.RELEASE);
      return { args: [...args, ...part.buckets.map(() => lease)], shard };
    });
    const settled = await this.send(commands, NO_DEADLINE);
    const failed = settled.find((s): s is Extract<Settled, { error: unknown }> => "error" in s);
    if (failed) throw failed.error;
    return settled.some((s) => "reply" in s && Array.isArray(s.reply) && s.reply.slice(1).includes(RELEASE_OUTCOMES.RESTORED));
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    const field = this.layout.field(key);
    const keys = this.layout.keysOf(ruleId, field);
    return (await this.redis.floodgateReset(keys.pageA, keys.pageB, keys.log, keys.leases, field)) > 0;
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }

  private shardsChanged(): void {
    if (this.shardWatchers.size === 0) return;
    const masters = new Set<string>();
    for (let slot = 0; slot < SLOTS; slot++) masters.add(this.shardOfSlot(slot));
    for (const watcher of this.shardWatchers) watcher([...masters]);
  }

  /** The master serving a slot, as the client last learnt it (it learns again after MOVED and after losing a node). */
  private shardOfSlot(slot: number): string {
    return (this.redis as Cluster).slots[slot]?.[0] ?? UNKNOWN_SHARD;
  }

  /** The call's buckets grouped by slot, in the order they first appear; one part on a single Redis. */
  private partsOf(call: CounterCall): Part[] {
    const all = call.buckets.map((_, i) => i);
    if (!this.redis.isCluster) return [{ buckets: all, shard: this.singleShard }];
    const bySlot = new Map<number, Part>();
    for (const i of all) {
      const bucket = call.buckets[i]!;
      const slot = this.layout.slotOf(bucket.ruleId, this.layout.field(bucket.key));
      const part = bySlot.get(slot);
      if (part) part.buckets.push(i);
      else bySlot.set(slot, { buckets: [i], shard: this.shardOfSlot(slot) });
    }
    return [...bySlot.values()];
  }

  /**
   * Gives reservations back. The decisions stand whatever happens: a release
   * that fails is reported with the units it leaves counted, and its shard
   * counts as failed. One still unanswered at the deadline (which the first
   * round may have used up) is not waited for, nor held against its shard,
   * whose reserve has just answered: it is reported only if it fails.
   */
  private async release(reservations: readonly Reservation[], deadline: Deadline, failedShards: Set<string>): Promise<void> {
    if (reservations.length === 0) return;
    const commands = reservations.map(({ call, part, receipts }): Command => {
      const { args, shard } = this.command(call, part, MODE.RELEASE);
      return { args: [...args, ...receipts], shard };
    });
    const settled = await this.send(commands, deadline);
    settled.forEach((s, i) => {
      if (!("error" in s)) return;
      const { call, receipts } = reservations[i]!;
      const report = (error: unknown) => this.onReleaseFailed(error, call.cost * receipts.filter((r) => r !== "").length);
      if (s.late !== undefined) return void s.late.then((answer) => "error" in answer && report(answer.error));
      failedShards.add(commands[i]!.shard);
      report(s.error);
    });
  }

  /**
   * Sends every command at once and waits for all, or for the deadline: a
   * command not answered by then settles as failed, its answer still to come.
   * On a cluster each command goes to its slot's node by itself: all are in
   * flight together, so the commands for one node travel back to back on its
   * connection, in one round trip, and each keeps ioredis's own handling of
   * MOVED, ASK and TRYAGAIN (an ioredis cluster pipeline retries those only
   * when every command in it failed alike). On one Redis, where every call
   * has one part and so every command is a decision or a dry run, several
   * go in calls of decide_each of up to CHECKS_PER_CALL, which fail each
   * command alone as separate commands would.
   */
  private send(commands: readonly Command[], deadline: Deadline): Promise<Settled[]> {
    if (this.redis.isCluster || commands.length === 1) {
      return Promise.all(commands.map(({ args }) => deadline.race(settle(this.redis.floodgateDecide(...args)), (error, late): Settled => ({ error, late }))));
    }
    const chunks: Promise<Settled[]>[] = [];
    for (let from = 0; from < commands.length; from += CHECKS_PER_CALL) {
      const chunk = commands.slice(from, from + CHECKS_PER_CALL);
      const answered = this.redis.floodgateDecideEach(chunk.map(({ args }) => args)).then(
        (replies) => chunk.map((_, i) => settledOf(replies[i])),
        (error: unknown) => chunk.map((): Settled => ({ error })),
      );
      // One race a call: its commands are answered together.
      chunks.push(deadline.race(answered, (error, late) => chunk.map((_, i): Settled => ({ error, late: late.then((all) => all[i]!) }))));
    }
    return Promise.all(chunks).then((settled) => ([] as Settled[]).concat(...settled));
  }

  private command(call: CounterCall, part: Part, mode: Mode): Command {
    return { args: decideArgs(this.layout, call, part.buckets, mode, this.clock ? this.clock.now() : null), shard: part.shard };
  }
}

const SLOTS = 16384;

/**
 * Most checks in one call of decide_each. A call holds Redis for all its
 * checks (about 10 µs each for three rules), where commands sent one by one
 * let other clients' commands in between: a batch of 1,000 goes as calls of
 * 64, each under a millisecond, all sent at once.
 */
export const CHECKS_PER_CALL = 64;

/** A lease's buckets as release mode takes them: a CONCURRENCY release reads only the algorithm of its spec. */
const LEASE_RELEASE_PARAMS: LimitParams = { algorithm: "CONCURRENCY", limit: 1, windowMs: 1, capacity: 1, action: "REJECT" };

/**
 * Whether a command's error says its shard is failing (unreachable, too slow,
 * out of memory, read-only, loading, ...), rather than Redis answering that
 * this one command could not run on its own buckets: a key of another type
 * where a bucket lives (WRONGTYPE), or an argument decide.lua cannot read or a
 * calendar period Redis's clock is not in (a Lua error of the function:
 * "ERR user_function:<line>: ...", without "ERR " when decide_each caught it
 * for one of its calls, or decide_each's own refusal of a call it does not
 * run).
 * Such a command fails its call alone, decided by failure mode, and leaves
 * the shard's breaker be: Redis answered. Held against the shard, one
 * poisoned bucket checked a few times in a row opened the breaker and
 * degraded every check on the shard. Errors Redis raises inside the function
 * for itself (OOM, READONLY, ...) keep their own code, and fail the shard.
 */
export function failsTheShard(error: unknown): boolean {
  return !(error instanceof ReplyError && CALL_ERROR.test((error as Error).message));
}

/** What failsTheShard takes for an error of the command's own: see there. */
const CALL_ERROR = /^(?:WRONGTYPE |(?:ERR )?user_function:\d+: |decide_each: )/;

/** One command's part of decide_each's reply: its answer, or its own error. */
function settledOf(reply: Buffer | Error | undefined): Settled {
  if (reply instanceof Error) return { error: reply };
  return reply === undefined ? { error: new Error("Redis answered decide_each without every call's reply") } : { reply };
}

function settle(reply: Promise<ScriptReply>): Promise<Settled> {
  return reply.then(
    (value): Settled => ({ reply: value }),
    (error: unknown): Settled => ({ error }),
  );
}

/**
 * When the commands of one decideEach must have answered; a deadline of
 * Infinity never comes. A late answer is not waited for: the call has failed
 * by then (its caller decides it by failure mode).
 */
class Deadline {
  private readonly timer: NodeJS.Timeout | null;
  private readonly expired: Promise<void>;

  constructor(private readonly ms: number) {
    let expire = () => undefined as void;
    this.expired = new Promise<void>((resolve) => (expire = resolve));
    this.timer = Number.isFinite(ms) ? setTimeout(expire, ms) : null;
  }

  /** The answer, or when the deadline comes first, what `missed` makes of the deadline's error and the answer still to come. */
  race<T>(answer: Promise<T>, missed: (error: Error, late: Promise<T>) => T): Promise<T> {
    if (this.timer === null) return answer;
    return Promise.race([answer, this.expired.then(() => missed(new Error(`no answer from Redis within ${this.ms} ms`), answer))]);
  }

  cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer);
  }
}

/** A deadline that never comes, for releases of reservations that answered late (nobody is waiting for them). */
const NO_DEADLINE = new Deadline(Number.POSITIVE_INFINITY);

/**
 * A decision's reply: now, allowed, then per rule remaining, reset and its
 * outcome, which is the wait before a retry (>= 0) when the rule refused,
 * and -1 - the delay when it conformed.
 */
function parseDecision(reply: ScriptReply): CounterReply {
  if (Array.isArray(reply)) throw new Error("decide.lua answered a decision with an array");
  const numbers = decisionNumbers(reply);
  const outcomes: BucketOutcome[] = [];
  for (let i = 2; i + 2 < numbers.length; i += 3) {
    const outcome = numbers[i + 2]!;
    const conforming = outcome < 0;
    outcomes.push({
      conforming,
      remaining: numbers[i]!,
      resetAtMs: numbers[i + 1]!,
      retryAfterMs: conforming ? null : outcome,
      delayMs: conforming ? -1 - outcome : 0,
    });
  }
  return { nowMs: numbers[0]!, allowed: numbers[1] === 1, outcomes };
}

/** What a reserve reply says the slot took, or null when it took nothing. */
function reservationOf(call: CounterCall, part: Part, reply: ScriptReply): Reservation | null {
  const { receipts } = parseReservation(reply, part.buckets.length);
  return receipts.some((r) => r !== "") ? { call, part, receipts } : null;
}

/** A reserve reply: now, allowed in the slot, 7 integers per rule, then a receipt per rule. */
function parseReservation(reply: ScriptReply, count: number): { nowMs: number; verdicts: Verdict[]; receipts: string[] } {
  if (!Array.isArray(reply)) throw new Error("decide.lua answered a reservation with a string");
  const at = (i: number) => reply[i] as number;
  const verdicts: Verdict[] = [];
  for (let r = 0; r < count; r++) {
    const i = 2 + r * 7;
    const retryAfter = at(i + 3);
    verdicts.push({
      conforming: at(i) === 1,
      ifAdmitted: { remaining: at(i + 1), resetAtMs: at(i + 2) },
      retryAfterMs: retryAfter < 0 ? null : retryAfter,
      delayMs: at(i + 4),
      current: { remaining: at(i + 5), resetAtMs: at(i + 6) },
    });
  }
  return { nowMs: at(0), verdicts, receipts: reply.slice(2 + count * 7).map(String) };
}

/**
 * One call's slots, reserved: their verdicts combined as one call would
 * combine them. The reply's time is the first bucket's slot's. When a slot
 * failed the call fails; a reserve that missed the deadline may still take
 * units, so when its answer comes `releaseLate` gives them back.
 */
function combineSlots(call: CounterCall, parts: readonly Part[], settled: readonly Settled[], releaseLate: (reservation: Reservation) => Promise<void>): Decided | Failed {
  const verdicts: Verdict[] = [];
  const reservations: Reservation[] = [];
  let nowMs = 0;
  settled.forEach((s, p) => {
    const part = parts[p]!;
    if ("error" in s) {
      s.late?.then((answer) => {
        const reservation = "reply" in answer ? reservationOf(call, part, answer.reply) : null;
        if (reservation !== null) void releaseLate(reservation);
      });
      return;
    }
    const reserved = parseReservation(s.reply, part.buckets.length);
    if (p === 0) nowMs = reserved.nowMs;
    part.buckets.forEach((bucket, j) => (verdicts[bucket] = reserved.verdicts[j]!));
    const reservation = reservationOf(call, part, s.reply);
    if (reservation !== null) reservations.push(reservation);
  });
  const failed = settled.find((s) => "error" in s);
  if (failed) return { error: failed.error, reservations };
  const decided = combine(
    verdicts.map((verdict) => ({ verdict })),
    call.buckets.map((b) => b.params.action),
    call.dryRun,
  );
  return { reply: { nowMs, allowed: decided.allowed, outcomes: decided.outcomes }, reservations };
}
