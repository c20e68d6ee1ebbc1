/**
 * The Lua scripts in lua/, registered once per client with defineCommand:
 * ioredis sends EVALSHA and, on NOSCRIPT (a restarted or flushed Redis), sends
 * the script again, so a check never fails because the cache was emptied.
 */

import { readFileSync } from "node:fs";
import type { Redis, Cluster } from "ioredis";
import type { CounterCall } from "../../domain/ports.js";
import type { Action, Algorithm } from "../../domain/rule.js";
import type { KeyLayout } from "./key-layout.js";

/** lua/ sits at the package root: three levels above both src/store/redis and dist/store/redis. */
const LUA_DIR = new URL("../../../lua/", import.meta.url);

export function readScript(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), "utf8");
}

/** decide.lua's arguments: the number of keys, the keys, then ARGV. */
export type ScriptArgs = [numberOfKeys: number, ...keysAndArgs: (string | number)[]];

const ALGORITHM_CODES: Record<Algorithm, number> = {
  SLIDING_WINDOW_COUNTER: 1,
  TOKEN_BUCKET: 2,
  FIXED_WINDOW: 3,
  SLIDING_WINDOW_LOG: 4,
  LEAKY_BUCKET: 5,
};

const ACTION_CODES: Record<Action, number> = { REJECT: 1, THROTTLE: 2, LOG_ONLY: 3 };

/** decide.lua's ARGV[3]. */
export const MODES = { decide: "0", dryRun: "1", reserve: "2", probe: "3", release: "4" } as const;
export type Mode = (typeof MODES)[keyof typeof MODES];

/**
 * decide.lua's arguments for some of a call's buckets (by their index in the
 * call); `nowMs` null lets the script read Redis TIME. A release appends the
 * receipts after these.
 */
export function decideArgs(layout: KeyLayout, call: CounterCall, buckets: readonly number[], mode: Mode, nowMs: number | null): ScriptArgs {
  const keys: string[] = [];
  const args: (string | number)[] = [nowMs ?? "", call.cost, mode, buckets.length];
  for (const i of buckets) {
    const bucket = call.buckets[i]!;
    const field = layout.field(bucket.key);
    keys.push(...layout.scriptKeys(bucket, field));
    const p = bucket.params;
    args.push(ALGORITHM_CODES[p.algorithm], p.limit, p.windowMs, p.capacity, ACTION_CODES[p.action], field);
  }
  return [keys.length, ...keys, ...args];
}

/** Integers, and in reserve replies the receipts (strings). */
export type ScriptReply = (number | string)[];

export interface FloodgateCommands {
  floodgateDecide(...args: ScriptArgs): Promise<ScriptReply>;
  floodgateReset(pageA: string, pageB: string, log: string, field: string): Promise<number>;
}

export type ScriptedRedis = (Redis | Cluster) & FloodgateCommands;

export function registerScripts(client: Redis | Cluster): ScriptedRedis {
  client.defineCommand("floodgateDecide", { lua: readScript("decide") });
  client.defineCommand("floodgateReset", { lua: readScript("reset"), numberOfKeys: 3 });
  return client as ScriptedRedis;
}
