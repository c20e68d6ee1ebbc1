/**
 * Counters in Redis. This class only translates: a call becomes one EVALSHA of
 * lua/decide.lua carrying every rule of the request, and the integer reply
 * becomes outcomes. Several calls (a batch, or the checks of one GraphQL
 * operation) go out in one pipeline, one round trip.
 */

import type { Pipeline } from "ioredis";
import type { BucketOutcome } from "../../domain/algorithms/index.js";
import type { Action, Algorithm } from "../../domain/rule.js";
import type { Clock, CounterCall, CounterReply, CounterStore } from "../../domain/ports.js";
import type { KeyLayout } from "./key-layout.js";
import { registerScripts, type ScriptArg, type ScriptedRedis } from "./scripts.js";
import type { Redis, Cluster } from "ioredis";

const ALGORITHM_CODES: Record<Algorithm, number> = {
  SLIDING_WINDOW_COUNTER: 1,
  TOKEN_BUCKET: 2,
  FIXED_WINDOW: 3,
  SLIDING_WINDOW_LOG: 4,
  LEAKY_BUCKET: 5,
};

const ACTION_CODES: Record<Action, number> = { REJECT: 1, THROTTLE: 2, LOG_ONLY: 3 };

export interface RedisCounterStoreOptions {
  layout: KeyLayout;
  /** Tests pin time through the script's ARGV; in service the script reads Redis TIME. */
  clock?: Clock;
}

export class RedisCounterStore implements CounterStore {
  readonly description: string;
  private readonly redis: ScriptedRedis;
  private readonly layout: KeyLayout;
  private readonly clock: Clock | undefined;

  constructor(client: Redis | Cluster, options: RedisCounterStoreOptions) {
    this.redis = registerScripts(client);
    this.layout = options.layout;
    this.clock = options.clock;
    this.description = "redis";
  }

  async decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    if (calls.length === 1) return [parseReply(await this.redis.floodgateDecide(...this.scriptCall(calls[0]!)))];
    const pipeline = this.redis.pipeline() as Pipeline & ScriptedRedis;
    for (const call of calls) void pipeline.floodgateDecide(...this.scriptCall(call));
    const results = (await pipeline.exec()) ?? [];
    return results.map(([error, reply]) => {
      if (error) throw error;
      return parseReply(reply as number[]);
    });
  }

  async reset(ruleId: string, key: string): Promise<boolean> {
    const field = this.layout.field(key);
    const keys = this.layout.keysOf(ruleId, field);
    return (await this.redis.floodgateReset(keys.pageA, keys.pageB, keys.log, field)) > 0;
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }

  private scriptCall(call: CounterCall): [number, ...ScriptArg[]] {
    return scriptCall(this.layout, call, this.clock ? this.clock.now() : null);
  }
}

/**
 * decide.lua's arguments for one call, as EVALSHA takes them after the sha:
 * the number of keys, the keys, then ARGV (see the script's header). With
 * `nowMs` null the script reads Redis TIME.
 */
export function scriptCall(layout: KeyLayout, call: CounterCall, nowMs: number | null): [number, ...ScriptArg[]] {
  const keys: string[] = [];
  const args: ScriptArg[] = [nowMs ?? "", call.cost, call.dryRun ? "1" : "0", call.buckets.length];
  for (const bucket of call.buckets) {
    const field = layout.field(bucket.key);
    keys.push(...layout.scriptKeys(bucket, field));
    const p = bucket.params;
    args.push(ALGORITHM_CODES[p.algorithm], p.limit, p.windowMs, p.capacity, ACTION_CODES[p.action], field);
  }
  return [keys.length, ...keys, ...args];
}

function parseReply(reply: number[]): CounterReply {
  const outcomes: BucketOutcome[] = [];
  for (let i = 2; i < reply.length; i += 5) {
    const retryAfter = reply[i + 3]!;
    outcomes.push({
      conforming: reply[i] === 1,
      remaining: reply[i + 1]!,
      resetAtMs: reply[i + 2]!,
      retryAfterMs: retryAfter < 0 ? null : retryAfter,
      delayMs: reply[i + 4]!,
    });
  }
  return { nowMs: reply[0]!, allowed: reply[1] === 1, outcomes };
}
