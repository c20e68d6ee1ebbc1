/**
 * The Lua scripts in lua/, registered once per client with defineCommand:
 * ioredis sends EVALSHA and, on NOSCRIPT (a restarted or flushed Redis), sends
 * the script again, so a check never fails because the cache was emptied.
 */

import { readFileSync } from "node:fs";
import type { Redis, Cluster } from "ioredis";
import type { CounterCall } from "../../domain/ports.js";
import type { KeyLayout } from "./key-layout.js";
import { ACTION_CODES, ALGORITHM_CODES, luaPrelude, type Mode } from "./script-codes.js";

/** lua/ sits at the package root: three levels above both src/store/redis and dist/store/redis. */
const LUA_DIR = new URL("../../../lua/", import.meta.url);

function readScript(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), "utf8");
}

/** decide.lua as Redis runs it: its constants (script-codes.ts) in front of it. */
export function decideScript(): string {
  return luaPrelude() + readScript("decide");
}

/** decide.lua's arguments: the number of keys, the keys, then ARGV. */
export type ScriptArgs = [numberOfKeys: number, ...keysAndArgs: (string | number)[]];

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
  client.defineCommand("floodgateDecide", { lua: decideScript() });
  client.defineCommand("floodgateReset", { lua: readScript("reset"), numberOfKeys: 3 });
  return client as ScriptedRedis;
}
