/**
 * Counters in Redis: one Redis, a Redis Sentinel group, or a Redis Cluster.
 * This class only translates calls into runs of lua/decide.lua and replies
 * into outcomes; the deciding and the combining of rules are the script's and
 * the domain's.
 *
 * A call whose buckets all live in one Redis Cluster slot (and every call on
 * one Redis) is one EVALSHA carrying every rule of the request, decided
 * atomically. A call whose buckets span slots is decided in two steps, so
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
 * been admitted (README, "Redis Cluster"): an over-count, never an
 * over-admission.
 *
 * Several calls (a batch, or the checks of one GraphQL operation) go out
 * together: one round trip for all reserves and decisions, one more for the
 * releases when there are any.
 */

import type { Cluster, Pipeline, Redis } from "ioredis";
import { combine, type BucketOutcome, type Verdict } from "../../domain/algorithms/index.js";
import type { Clock, CounterCall, CounterReply, CounterStore } from "../../domain/ports.js";
import type { KeyLayout } from "./key-layout.js";
import { decideArgs, MODES, registerScripts, type Mode, type ScriptArgs, type ScriptReply, type ScriptedRedis } from "./scripts.js";

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

/** The indexes (in the call) of the buckets that live in one slot. */
type Part = number[];

/** What one slot took for a call, to be given back if the call is not admitted. */
interface Reservation {
  call: CounterCall;
  part: Part;
  receipts: string[];
}

type Settled = { reply: ScriptReply } | { error: unknown };

interface Decided {
  reply: CounterReply;
  reservations: Reservation[];
}

interface Failed {
  error: unknown;
  reservations: Reservation[];
}

export class RedisCounterStore implements CounterStore {
  readonly description: string;
  private readonly redis: ScriptedRedis;
  private readonly layout: KeyLayout;
  private readonly clock: Clock | undefined;
  private readonly onReleaseFailed: (error: unknown, units: number) => void;

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
  }

  async decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    const plans = calls.map((call) => ({ call, parts: this.partsOf(call) }));
    const first = plans.flatMap(({ call, parts }) =>
      parts.length === 1
        ? [this.scriptArgs(call, parts[0]!, call.dryRun ? MODES.dryRun : MODES.decide)]
        : parts.map((part) => this.scriptArgs(call, part, call.dryRun ? MODES.probe : MODES.reserve)),
    );
    const settled = await this.send(first);
    let next = 0;
    const results = plans.map(({ call, parts }): Decided | Failed => {
      const mine = settled.slice(next, (next += parts.length));
      if (parts.length > 1) return combineSlots(call, parts, mine);
      const only = mine[0]!;
      return "error" in only ? { error: only.error, reservations: [] } : { reply: parseDecision(only.reply), reservations: [] };
    });

    // A failed call fails the batch: nothing of it is admitted, so every
    // reservation goes back (a single-slot call that was decided stays
    // counted, as when a pipeline on one Redis fails part way).
    const failed = results.find((r): r is Failed => "error" in r);
    if (failed) {
      await this.release(results.flatMap((r) => r.reservations));
      throw failed.error;
    }
    const decided = results.filter((r): r is Decided => "reply" in r);
    await this.release(decided.flatMap((r) => (r.reply.allowed ? [] : r.reservations)));
    return decided.map((r) => r.reply);
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    const field = this.layout.field(key);
    const keys = this.layout.keysOf(ruleId, field);
    return (await this.redis.floodgateReset(keys.pageA, keys.pageB, keys.log, field)) > 0;
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }

  /** The call's buckets grouped by slot, in the order they first appear; one part on a single Redis. */
  private partsOf(call: CounterCall): Part[] {
    const all = call.buckets.map((_, i) => i);
    if (!this.redis.isCluster) return [all];
    const bySlot = new Map<number, Part>();
    for (const i of all) {
      const bucket = call.buckets[i]!;
      const slot = this.layout.slotOf(bucket.ruleId, this.layout.field(bucket.key));
      const part = bySlot.get(slot);
      if (part) part.push(i);
      else bySlot.set(slot, [i]);
    }
    return [...bySlot.values()];
  }

  private async release(reservations: readonly Reservation[]): Promise<void> {
    if (reservations.length === 0) return;
    const settled = await this.send(reservations.map(({ call, part, receipts }) => [...this.scriptArgs(call, part, MODES.release), ...receipts]));
    settled.forEach((s, i) => {
      if (!("error" in s)) return;
      const { call, receipts } = reservations[i]!;
      this.onReleaseFailed(s.error, call.cost * receipts.filter((r) => r !== "").length);
    });
  }

  /**
   * Sends every command at once and waits for all. On a cluster each command
   * goes to its slot's node by itself: all are in flight together, so the
   * commands for one node travel back to back on its connection, in one round
   * trip, and each keeps ioredis's own handling of MOVED, ASK and TRYAGAIN
   * (an ioredis cluster pipeline retries those only when every command in it
   * failed alike). On one Redis they go as one pipeline.
   */
  private async send(commands: readonly ScriptArgs[]): Promise<Settled[]> {
    if (this.redis.isCluster || commands.length === 1) {
      return Promise.all(
        commands.map((args) =>
          this.redis.floodgateDecide(...args).then(
            (reply): Settled => ({ reply }),
            (error: unknown): Settled => ({ error }),
          ),
        ),
      );
    }
    const pipeline = this.redis.pipeline() as Pipeline & ScriptedRedis;
    for (const args of commands) void pipeline.floodgateDecide(...args);
    try {
      const results = (await pipeline.exec()) ?? [];
      return results.map(([error, reply]) => (error ? { error } : { reply: reply as ScriptReply }));
    } catch (error) {
      return commands.map(() => ({ error }));
    }
  }

  private scriptArgs(call: CounterCall, part: Part, mode: Mode): ScriptArgs {
    return decideArgs(this.layout, call, part, mode, this.clock ? this.clock.now() : null);
  }
}

/** A decide reply: now, allowed, then 5 integers per rule. */
function parseDecision(reply: ScriptReply): CounterReply {
  const at = (i: number) => reply[i] as number;
  const outcomes: BucketOutcome[] = [];
  for (let i = 2; i < reply.length; i += 5) {
    const retryAfter = at(i + 3);
    outcomes.push({
      conforming: at(i) === 1,
      remaining: at(i + 1),
      resetAtMs: at(i + 2),
      retryAfterMs: retryAfter < 0 ? null : retryAfter,
      delayMs: at(i + 4),
    });
  }
  return { nowMs: at(0), allowed: at(1) === 1, outcomes };
}

/** A reserve reply: now, allowed in the slot, 7 integers per rule, then a receipt per rule. */
function parseReservation(reply: ScriptReply, count: number): { nowMs: number; verdicts: Verdict[]; receipts: string[] } {
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
 * combine them. The reply's time is the first bucket's slot's.
 */
function combineSlots(call: CounterCall, parts: readonly Part[], settled: readonly Settled[]): Decided | Failed {
  const verdicts: Verdict[] = [];
  const reservations: Reservation[] = [];
  let nowMs = 0;
  settled.forEach((s, p) => {
    if ("error" in s) return;
    const part = parts[p]!;
    const reserved = parseReservation(s.reply, part.length);
    if (p === 0) nowMs = reserved.nowMs;
    part.forEach((bucket, j) => (verdicts[bucket] = reserved.verdicts[j]!));
    if (reserved.receipts.some((r) => r !== "")) reservations.push({ call, part, receipts: reserved.receipts });
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
