/**
 * What the baseline asks of Redis for one check, for redis-benchmark: one
 * EVALSHA of rate-limiter-flexible's increment script per rule, three in all.
 * They are recorded from the baseline's own limiters (baseline-rules.ts)
 * through a stand-in for their ioredis client, so that the script, keys and
 * arguments are exactly what rate-limiter-flexible sends, not a copy of them.
 */

import { baselineRules } from "./baseline-rules.js";
import { spreadOverUsers } from "./ceiling.js";
import { LIMITS, type Caller } from "./workload.js";

export interface BaselineCommands {
  /** rate-limiter-flexible's Lua script, to SCRIPT LOAD. */
  script: string;
  /** One EVALSHA per rule with the script's sha; the first rule's key, the user's, spread over the bench's 10,000 users as decideCommand spreads it. */
  commands(sha: string): string[][];
}

export async function baselineCommands(caller: Caller, prefix: string): Promise<BaselineCommands> {
  let script = "";
  const calls: string[][] = [];
  // rate-limiter-flexible defines its script on an ioredis client with defineCommand, then calls it by name with [key, ...args].
  const recorder = {
    defineCommand: (_name: string, definition: { lua: string }) => {
      script = definition.lua;
    },
    rlflxIncr: (keyAndArgs: unknown[]) => {
      calls.push(keyAndArgs.map(String));
      return Promise.resolve([1, LIMITS.windowSeconds * 1000]);
    },
  };
  for (const rule of baselineRules(recorder, prefix)) await rule.limiter.consume(rule.keyOf(caller));
  if (script === "" || calls.length !== 3) throw new Error(`rate-limiter-flexible did not call its script as expected: ${JSON.stringify(calls)}`);
  return {
    script,
    commands: (sha) => calls.map(([key, ...args], i) => ["EVALSHA", sha, "1", i === 0 ? spreadOverUsers(key!) : key!, ...args]),
  };
}
