/**
 * The ceiling: how many decisions per second Redis itself can make on this
 * machine, measured with redis-benchmark sending Floodgate's own decide.lua
 * (FCALL of its library's function) with the keys and arguments of a bench check: the three rules'
 * page pairs, their parameters, and the bucket fields, the user's spread over
 * the bench's 10,000 users with redis-benchmark's __rand_int__. Pipelined, so
 * the client's round trips do not limit it.
 */

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Redis } from "ioredis";
import type { BucketRef } from "../../src/domain/ports.js";
import type { KeyLayout } from "../../src/store/redis/key-layout.js";
import { MODE } from "../../src/store/redis/script-codes.js";
import { decideArgs, decideEachArgs, floodgateLibrary, loadLibrary, type ScriptArgs } from "../../src/store/redis/scripts.js";

const run = promisify(execFile);

export async function redisCeiling(options: {
  redis: Redis;
  redisUrl: string;
  layout: KeyLayout;
  /** The buckets of one bench check, the user's first. */
  buckets: BucketRef[];
  requests: number;
}): Promise<number> {
  const { hostname, port } = new URL(options.redisUrl);
  const library = floodgateLibrary();
  return retryOnMissingFunction(async () => {
    await loadLibrary(options.redis, library);
    return redisBenchmark({ host: hostname, port: Number(port || 6379), requests: options.requests, command: decideCommand(options.layout, options.buckets, library.decide) });
  });
}

/** The FCALL of one bench check, its first bucket (the user's) spread over 10,000 keys with redis-benchmark's __rand_int__. */
export function decideCommand(layout: KeyLayout, buckets: readonly BucketRef[], functionName: string): string[] {
  const [first, ...rest] = buckets;
  const spread = [{ ...first!, key: spreadOverUsers(first!.key) }, ...rest];
  const keysAndArgs = decideArgs(layout, { buckets: spread, cost: 1, dryRun: false }, spread.map((_, i) => i), MODE.DECIDE, null);
  return ["FCALL", functionName, ...keysAndArgs.map(String)];
}

/** Checks in one decide_each call where the Lua benches measure one: the client's mean batch in the bench. */
export const CHECKS_EACH = 16;

/**
 * decide_each's command for `checks` copies of a check (`decideCommand`'s
 * arguments after its function name), each copy's first bucket spread over
 * the users: how a batch's checks reach one Redis.
 */
export function decideEachCommand(check: readonly string[], checks: number, functionName: string): string[] {
  const [keyCount, ...keysAndArgs] = check.slice(2);
  const args: ScriptArgs = [Number(keyCount), ...keysAndArgs];
  return ["FCALL", functionName, ...decideEachArgs(Array.from({ length: checks }, () => args))];
}

/** A user's key ("...:u0") as redis-benchmark's __rand_int__ (-r 10000) spreads it over the bench's 10,000 users. */
export function spreadOverUsers(key: string): string {
  return key.replace(/\d+$/, "__rand_int__");
}

/** Runs redis-benchmark pipelined (-c 32 -P 16) with one command and returns its requests per second. */
export async function redisBenchmark(options: { host: string; port: number; requests: number; command: readonly string[] }): Promise<number> {
  const args = ["-h", options.host, "-p", String(options.port), "-c", "32", "-P", "16", "-r", "10000", "-n", String(options.requests), "--csv"];
  const { stdout } = await run("redis-benchmark", [...args, ...options.command], { maxBuffer: 1 << 20 });
  // --csv: a header line, then "<command>","<requests per second>",...
  const rps = Number(JSON.parse(`[${stdout.trim().split("\n").at(-1)!}]`)[1]);
  if (!Number.isFinite(rps)) throw new Error(`unexpected redis-benchmark output: ${stdout}`);
  return rps;
}

/** A shared Redis may have its functions flushed (FUNCTION FLUSH, a restart) by someone else between the load and the run. */
async function retryOnMissingFunction<T>(attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (tries >= 3 || !String((error as { stderr?: string }).stderr).includes("Function not found")) throw error;
    }
  }
}
