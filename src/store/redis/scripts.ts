/**
 * The Lua scripts in lua/, registered once per client with defineCommand:
 * ioredis sends EVALSHA and, on NOSCRIPT (a restarted or flushed Redis), sends
 * the script again, so a check never fails because the cache was emptied.
 */

import { readFileSync } from "node:fs";
import type { Redis, Cluster } from "ioredis";

/** lua/ sits at the package root: three levels above both src/store/redis and dist/store/redis. */
const LUA_DIR = new URL("../../../lua/", import.meta.url);

export function readScript(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), "utf8");
}

export type ScriptArg = string | number;

export interface FloodgateCommands {
  floodgateDecide(numberOfKeys: number, ...keysAndArgs: ScriptArg[]): Promise<number[]>;
  floodgateReset(pageA: string, pageB: string, log: string, field: string): Promise<number>;
}

export type ScriptedRedis = (Redis | Cluster) & FloodgateCommands;

export function registerScripts(client: Redis | Cluster): ScriptedRedis {
  client.defineCommand("floodgateDecide", { lua: readScript("decide") });
  client.defineCommand("floodgateReset", { lua: readScript("reset"), numberOfKeys: 3 });
  return client as ScriptedRedis;
}
