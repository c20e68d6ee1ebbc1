/**
 * decide.lua against an older version of itself, side by side: `npm run
 * lua:bench` (against main's) or `npm run lua:bench -- --old <git ref>`.
 *
 * It starts a private redis-server (no persistence), loads both versions, and
 * drives each with redis-benchmark (-c 32 -P 16) using the keys and arguments
 * of a bench check, exactly as the bench's ceiling does
 * (scripts/bench/ceiling.ts): an FCALL of the library's function, or for a
 * version from before the library (decide.lua sent as a script) an EVALSHA
 * with that version's own arguments; the three rules of the bench tenant, the user's
 * spread over 10,000 users. The old and new scripts alternate, round after
 * round, each run on an emptied Redis with its stats reset, so that drift in
 * the machine's load falls on both alike; only the ratios mean anything on a
 * shared machine. Besides the bench's check (SLIDING_WINDOW_COUNTER) it
 * measures the same three rules as TOKEN_BUCKET, and the per-user rule alone
 * as SLIDING_WINDOW_LOG.
 *
 * Reported per version: decisions/s (redis-benchmark) and Redis's own time per
 * call (INFO commandstats, usec_per_call of fcall or evalsha), medians over the
 * rounds.
 *
 * Then the bench's check through the working tree's decide.lua against the
 * same check through the baseline, rate-limiter-flexible: its three EVALSHAs
 * (one per rule, scripts/bench/baseline-commands.ts), each its own
 * redis-benchmark run, alternating with decide.lua's round after round. Per
 * check: µs of Redis at pipelined saturation (1e6 / calls per second, summed
 * over the three) and Redis's own time (usec_per_call, summed likewise).
 * Beside them, the same check 16 times in one call of decide_each, as a
 * batch's checks reach one Redis, divided by 16.
 *
 * Options: --rounds (default 5), --requests (per run, default 200,000).
 */

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { NO_ATTRIBUTES } from "../src/domain/attributes.js";
import type { Algorithm } from "../src/domain/rule.js";
import type { BucketRef } from "../src/domain/ports.js";
import type { CheckRequest } from "../src/domain/request.js";
import { compileRule } from "../src/engine/decision/compiled-rule.js";
import { RuleIndex } from "../src/engine/decision/rule-index.js";
import { KeyLayout } from "../src/store/redis/key-layout.js";
import { MODE } from "../src/store/redis/script-codes.js";
import type * as ScriptCodes from "../src/store/redis/script-codes.js";
import * as Scripts from "../src/store/redis/scripts.js";
import { startOwnRedis } from "../test/harness/redis-server.js";
import { baselineCommands } from "./bench/baseline-commands.js";
import { CHECKS_EACH, decideCommand, decideEachCommand, redisBenchmark, spreadOverUsers } from "./bench/ceiling.js";
import { caller, ruleSet, TENANT } from "./bench/workload.js";
import { numberOption } from "../test/harness/number-option.js";
import { importOldVersion, oldRef } from "../test/harness/old-version.js";

const run = promisify(execFile);
const OLD_REF = oldRef();
const ROUNDS = numberOption("rounds", 5);
const LAYOUT = new KeyLayout("fgluabench:", 16_384);
const REQUESTS = numberOption("requests", 200_000);

interface Scenario {
  name: string;
  buckets: BucketRef[];
}

interface Measured {
  perSecond: number;
  usecPerCall: number;
}

/** The buckets of the bench's check by its first caller: the bench tenant's three rules. */
function benchBuckets(): BucketRef[] {
  const c = caller(0);
  const request: CheckRequest = { tenantId: TENANT, userId: c.userId, ip: c.ip, apiKey: null, userAgent: null, cookie: null, resource: c.resource, method: c.method, cost: 1, dryRun: false, attributes: NO_ATTRIBUTES, ignorePathCase: false };
  return new RuleIndex(ruleSet(10).map(compileRule))
    .match(request)
    .map((rule) => ({ ruleId: rule.rule.id, key: rule.keyOf(request)!, params: rule.params }));
}

function scenarios(): Scenario[] {
  const bench = benchBuckets();
  const as = (algorithm: Algorithm, buckets: BucketRef[]) => buckets.map((b) => ({ ...b, params: { ...b.params, algorithm } }));
  return [
    { name: "3 rules, SLIDING_WINDOW_COUNTER (the bench's check)", buckets: bench },
    { name: "3 rules, TOKEN_BUCKET", buckets: as("TOKEN_BUCKET", bench) },
    { name: "1 rule, SLIDING_WINDOW_LOG (per user)", buckets: as("SLIDING_WINDOW_LOG", bench.slice(0, 1)) },
  ];
}

async function measure(redis: Redis, port: number, command: string[]): Promise<Measured> {
  await redis.flushall();
  await redis.config("RESETSTAT");
  const perSecond = await redisBenchmark({ host: "127.0.0.1", port, requests: REQUESTS, command });
  const name = command[0]!.toLowerCase();
  const stats = (await redis.info("commandstats")).match(new RegExp(`cmdstat_${name}:calls=(\\d+),usec=\\d+,usec_per_call=([\\d.]+)`));
  if (!stats) throw new Error(`no ${name} in INFO commandstats`);
  if (Number(stats[1]) !== REQUESTS) throw new Error(`${name} ran ${stats[1]} times, expected ${REQUESTS}`);
  return { perSecond, usecPerCall: Number(stats[2]) };
}

/** A version of decide.lua loaded on the bench's Redis, and the command of a check through it. */
interface Version {
  command(buckets: readonly BucketRef[]): string[];
}


/** The working tree's library. */
async function currentVersion(redis: Redis): Promise<Version & { decideEach: string }> {
  const library = Scripts.floodgateLibrary();
  await Scripts.loadLibrary(redis, library);
  return { command: (buckets) => decideCommand(LAYOUT, buckets, library.decide), decideEach: library.decideEach };
}

/**
 * decide.lua at `ref` as Redis ran it: the library assembled from that
 * version's lua/ by its own floodgateLibrary, or, for a version from before the
 * library, the script behind the prelude of that version's codes where it had
 * them (script-codes.ts), with that version's arguments (its decideArgs).
 */
async function oldVersion(redis: Redis, ref: string): Promise<Version> {
  const show = async (file: string) => (await run("git", ["show", `${ref}:${file}`], { maxBuffer: 1 << 24 })).stdout;
  const old = await importOldVersion<typeof Scripts>(ref, "src/store/redis/scripts.ts");
  try {
    const { floodgateLibrary, decideArgs } = old.module as typeof Scripts & { decideArgs: typeof Scripts.decideArgs };
    if (typeof floodgateLibrary === "function") {
      // merge.lua came after the library: a version without it ignores what it is given.
      const merge = await show("lua/merge.lua").catch(() => "");
      const library = floodgateLibrary({ decide: await show("lua/decide.lua"), reset: await show("lua/reset.lua"), merge });
      await Scripts.loadLibrary(redis, library);
      return { command: (buckets) => spreadCommand(["FCALL", library.decide], buckets, decideArgs) };
    }
    const sha = (await redis.script("LOAD", await oldScript(ref, await show("lua/decide.lua")))) as string;
    return { command: (buckets) => spreadCommand(["EVALSHA", sha], buckets, decideArgs) };
  } finally {
    await old.remove();
  }
}

/** A check's command with a version's own arguments, its first bucket spread over the bench's users as decideCommand does. */
function spreadCommand(head: string[], buckets: readonly BucketRef[], decideArgs: typeof Scripts.decideArgs): string[] {
  const [first, ...rest] = buckets;
  const spread = [{ ...first!, key: spreadOverUsers(first!.key) }, ...rest];
  return [...head, ...decideArgs(LAYOUT, { buckets: spread, cost: 1, dryRun: false }, spread.map((_, i) => i), MODE.DECIDE, null).map(String)];
}

/** A decide.lua sent as a script: behind the prelude of its version's codes where it had them. */
async function oldScript(ref: string, script: string): Promise<string> {
  const hasCodes = await run("git", ["cat-file", "-e", `${ref}:src/store/redis/script-codes.ts`]).then(
    () => true,
    () => false,
  );
  if (!hasCodes) return script;
  const codes = await importOldVersion<typeof ScriptCodes>(ref, "src/store/redis/script-codes.ts");
  try {
    return codes.module.luaPrelude() + script;
  } finally {
    await codes.remove();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** µs of Redis per check, at saturation and by its own clock, summed over a check's commands. */
interface PerCheck {
  saturatedUs: number;
  usecPerCall: number;
}

async function perCheck(redis: Redis, port: number, commands: string[][]): Promise<PerCheck> {
  const sum: PerCheck = { saturatedUs: 0, usecPerCall: 0 };
  for (const command of commands) {
    const m = await measure(redis, port, command);
    sum.saturatedUs += 1e6 / m.perSecond;
    sum.usecPerCall += m.usecPerCall;
  }
  return sum;
}

/** The goal of issue 13: decide.lua's Redis time for the bench's check no more than rate-limiter-flexible's three scripts'. */
async function againstBaseline(redis: Redis, port: number, current: Version & { decideEach: string }): Promise<void> {
  const baseline = await baselineCommands(caller(0), "rlfluabench:");
  const baselineSha = (await redis.script("LOAD", baseline.script)) as string;
  const check = current.command(benchBuckets());
  const checks = { decide: [check], each: [decideEachCommand(check, CHECKS_EACH, current.decideEach)], baseline: baseline.commands(baselineSha) };
  const runs: Record<keyof typeof checks, PerCheck[]> = { decide: [], each: [], baseline: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of ["decide", "each", "baseline"] as const) runs[name].push(await perCheck(redis, port, checks[name]));
  }
  const [decide, each, rlf] = (["decide", "each", "baseline"] as const).map((name) => ({
    saturatedUs: median(runs[name].map((r) => r.saturatedUs)) / (name === "each" ? CHECKS_EACH : 1),
    usecPerCall: median(runs[name].map((r) => r.usecPerCall)) / (name === "each" ? CHECKS_EACH : 1),
  }));
  const line = (label: string, m: PerCheck) => `  ${label.padEnd(42)} ${m.saturatedUs.toFixed(2).padStart(6)} µs at saturation  ${m.usecPerCall.toFixed(2).padStart(6)} usec_per_call`;
  console.log(`\nthe bench's check (3 rules), µs of Redis per check: decide.lua vs rate-limiter-flexible, same keys, medians`);
  console.log(line("decide.lua (working tree), 1 FCALL", decide!));
  console.log(line(`decide_each of ${CHECKS_EACH} checks, per check`, each!));
  console.log(line("rate-limiter-flexible, 3 EVALSHA (summed)", rlf!));
  // The goal's measure is redis-benchmark's, at saturation: what Redis spends to read, run and answer a check's commands
  // (issue 13's "25 µs against 12" was 1 / the ceiling). usec_per_call leaves out reading and answering, which three
  // commands pay three times; it is shown beside the goal, not counted in it.
  const saturated = decide!.saturatedUs / rlf!.saturatedUs;
  const commandAlone = decide!.usecPerCall / rlf!.usecPerCall;
  console.log(
    `  decide.lua / rate-limiter-flexible: ${saturated.toFixed(2)}x at saturation (goal <= 1: ${saturated <= 1 ? "met" : "NOT met"}), ${commandAlone.toFixed(2)}x usec_per_call (the command alone, ${commandAlone <= 1 ? "no more" : "more"} than the three scripts')`,
  );
  console.log(`  decide_each per check / rate-limiter-flexible: ${(each!.saturatedUs / rlf!.saturatedUs).toFixed(2)}x at saturation, ${(each!.usecPerCall / rlf!.usecPerCall).toFixed(2)}x usec_per_call`);
}

async function main(): Promise<void> {
  const server = await startOwnRedis();
  const redis = new Redis(server.url);
  try {
    const versions = { old: await oldVersion(redis, OLD_REF), new: await currentVersion(redis) };
    console.log(`decide.lua: ${OLD_REF} (old) vs the working tree (new); ${ROUNDS} rounds of ${REQUESTS.toLocaleString("en")} calls each, -c 32 -P 16, medians`);
    for (const scenario of scenarios()) {
      const runs: Record<"old" | "new", Measured[]> = { old: [], new: [] };
      for (let round = 0; round < ROUNDS; round++) {
        for (const version of ["old", "new"] as const) runs[version].push(await measure(redis, server.port, versions[version].command(scenario.buckets)));
      }
      const [old, now] = (["old", "new"] as const).map((v) => ({
        perSecond: median(runs[v].map((r) => r.perSecond)),
        usecPerCall: median(runs[v].map((r) => r.usecPerCall)),
      }));
      console.log(`\n${scenario.name}`);
      console.log(`  old: ${old!.perSecond.toFixed(0).padStart(7)} decisions/s  ${old!.usecPerCall.toFixed(2).padStart(6)} usec_per_call`);
      console.log(`  new: ${now!.perSecond.toFixed(0).padStart(7)} decisions/s  ${now!.usecPerCall.toFixed(2).padStart(6)} usec_per_call`);
      console.log(`  new/old: ${(now!.perSecond / old!.perSecond).toFixed(2)}x decisions/s, ${(now!.usecPerCall / old!.usecPerCall).toFixed(2)}x usec_per_call`);
    }
    await againstBaseline(redis, server.port, versions.new);
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

await main();
