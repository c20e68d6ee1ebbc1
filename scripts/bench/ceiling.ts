/**
 * The ceiling: how many decisions per second Redis itself can make on this
 * machine, measured with redis-benchmark sending Floodgate's own decide.lua
 * (EVALSHA) with the keys and arguments of a bench check: the three rules'
 * page pairs, their parameters, and the bucket fields, the user's spread over
 * the bench's 10,000 users with redis-benchmark's __rand_int__. Pipelined, so
 * the client's round trips do not limit it.
 */

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Redis } from "ioredis";
import type { BucketRef } from "../../src/domain/ports.js";
import type { KeyLayout } from "../../src/store/redis/key-layout.js";
import { decideArgs, MODES, readScript } from "../../src/store/redis/scripts.js";

const run = promisify(execFile);

export async function redisCeiling(options: {
  redis: Redis;
  redisUrl: string;
  layout: KeyLayout;
  /** The buckets of one bench check, the user's first. */
  buckets: BucketRef[];
  requests: number;
}): Promise<number> {
  const [first, ...rest] = options.buckets;
  const spread = { ...first!, key: first!.key.replace(/\d+$/, "__rand_int__") };
  const buckets = [spread, ...rest];
  const keysAndArgs = decideArgs(options.layout, { buckets, cost: 1, dryRun: false }, buckets.map((_, i) => i), MODES.decide, null);
  const { hostname, port } = new URL(options.redisUrl);
  const stdout = await retryOnNoScript(async () => {
    const sha = (await options.redis.script("LOAD", readScript("decide"))) as string;
    const args = ["-h", hostname, "-p", port || "6379", "-c", "32", "-P", "16", "-r", "10000", "-n", String(options.requests), "--csv"];
    return (await run("redis-benchmark", [...args, "EVALSHA", sha, ...keysAndArgs.map(String)], { maxBuffer: 1 << 20 })).stdout;
  });
  // --csv: a header line, then "<command>","<requests per second>",...
  const row = stdout.trim().split("\n").at(-1)!;
  const rps = Number(JSON.parse(`[${row}]`)[1]);
  if (!Number.isFinite(rps)) throw new Error(`unexpected redis-benchmark output: ${stdout}`);
  return rps;
}

/** A shared Redis may have its script cache flushed (SCRIPT FLUSH, a restart) by someone else between the load and the run. */
async function retryOnNoScript(attempt: () => Promise<string>): Promise<string> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (tries >= 3 || !String((error as { stderr?: string }).stderr).includes("NOSCRIPT")) throw error;
    }
  }
}
