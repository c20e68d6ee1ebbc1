/**
 * Machine instructions Redis executes for the bench's check, counted by
 * valgrind's callgrind: `npm run lua:instructions`. Unlike time, the count
 * does not move with what else runs on the machine (the same binary, inputs
 * and environment give the same total within a percent), so it shows what a
 * change to decide.lua buys on a shared two-core machine.
 *
 * It starts a private redis-server under callgrind, loads the working tree's
 * library and rate-limiter-flexible's script, and drives each with
 * redis-benchmark (-c 4 -P 16, 10,000 calls measured after 20,000 of
 * warm-up): the bench's 3-rule check as one FCALL of decide.lua, and as
 * rate-limiter-flexible's three EVALSHAs (scripts/bench/baseline-commands.ts),
 * the user's key spread over the bench's 10,000 users. Per check, two counts:
 * inside the command (fcallCommand or evalShaCommand, inclusive: what
 * `usec_per_call` times) and the whole server (also reading, parsing and
 * answering each command: what saturation measures).
 *
 * `-- --costs`: what Redis's Lua interpreter spends on one operation of each
 * kind (a loop of 1,000 in a function of a library of its own, less the
 * empty loop), which decide.lua's "Speed" relies on.
 *
 * Needs valgrind (Debian's package) and takes a few minutes: callgrind runs
 * Redis about fifty times slower.
 */

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { NO_ATTRIBUTES } from "../src/domain/attributes.js";
import type { CheckRequest } from "../src/domain/request.js";
import { compileRule } from "../src/engine/decision/compiled-rule.js";
import { RuleIndex } from "../src/engine/decision/rule-index.js";
import { KeyLayout } from "../src/store/redis/key-layout.js";
import { floodgateLibrary, loadLibrary } from "../src/store/redis/scripts.js";
import { freePort } from "../test/harness/free-port.js";
import { waitForPort } from "../test/harness/redis-server.js";
import { baselineCommands } from "./bench/baseline-commands.js";
import { CHECKS_EACH, decideCommand, decideEachCommand } from "./bench/ceiling.js";
import { caller, ruleSet, TENANT } from "./bench/workload.js";

const MEASURED = 10_000;
const WARM_UP = 20_000;
const LOOP = 1_000;

/** A redis-server under callgrind, collecting only inside the commands named (all of it when none are). */
interface Counted {
  redis: Redis;
  port: number;
  /** Forgets what was counted so far. */
  zero(): void;
  /** Instructions counted since the last zero(). */
  count(): number;
  stop(): Promise<void>;
}

async function countedRedis(collectOnlyIn: readonly string[]): Promise<Counted> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "floodgate-callgrind-"));
  const collect = collectOnlyIn.length === 0 ? [] : ["--collect-atstart=no", ...collectOnlyIn.map((fn) => `--toggle-collect=${fn}`)];
  const child: ChildProcess = spawn(
    "valgrind",
    ["--tool=callgrind", `--callgrind-out-file=${dir}/callgrind.out`, ...collect, "redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: "ignore" },
  );
  await waitForPort(port, true, 120_000);
  const redis = new Redis({ port, host: "127.0.0.1" });
  let dumps = 0;
  const control = (...args: string[]) => execFileSync("callgrind_control", [...args, String(child.pid)], { stdio: "ignore" });
  return {
    redis,
    port,
    zero: () => control("--zero"),
    count: () => {
      control("--dump");
      dumps++;
      // callgrind names its n-th dump <file>.<n>; the totals line sums what was counted since the last zero.
      const dump = readdirSync(dir).find((name) => name === `callgrind.out.${dumps}`);
      const totals = dump === undefined ? null : /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(dir, dump), "utf8"));
      if (totals === null) throw new Error(`callgrind wrote no dump ${dumps} in ${dir}`);
      return Number(totals[1]);
    },
    stop: async () => {
      redis.disconnect();
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function redisBenchmark(port: number, requests: number, command: readonly string[]): void {
  execFileSync("redis-benchmark", ["-h", "127.0.0.1", "-p", String(port), "-c", "4", "-P", "16", "-r", "10000", "-n", String(requests), "-q", ...command], { stdio: "ignore" });
}

/** Instructions per check: each command of a check run for MEASURED checks after WARM_UP, a command carrying `checksPerCommand` checks. */
function perCheck(counted: Counted, commands: readonly string[][], checksPerCommand = 1): number {
  for (const command of commands) redisBenchmark(counted.port, WARM_UP / checksPerCommand, command);
  counted.zero();
  for (const command of commands) redisBenchmark(counted.port, MEASURED / checksPerCommand, command);
  return counted.count() / MEASURED;
}

/** The buckets of the bench's check by its first caller: the bench tenant's three rules. */
function benchBuckets() {
  const c = caller(0);
  const request: CheckRequest = { tenantId: TENANT, userId: c.userId, ip: c.ip, apiKey: null, userAgent: null, cookie: null, resource: c.resource, method: c.method, cost: 1, dryRun: false, attributes: NO_ATTRIBUTES, ignorePathCase: false };
  return new RuleIndex(ruleSet(10).map(compileRule))
    .match(request)
    .map((rule) => ({ ruleId: rule.rule.id, key: rule.keyOf(request)!, params: rule.params }));
}

async function checks(): Promise<void> {
  const library = floodgateLibrary();
  const baseline = await baselineCommands(caller(0), "rlfinstructions:");
  console.log(`instructions Redis executes per check (callgrind; ${MEASURED.toLocaleString("en")} checks after ${WARM_UP.toLocaleString("en")} of warm-up)`);
  for (const [scope, functions] of [
    ["inside the command", ["fcallCommand", "evalShaCommand"]],
    ["the whole server", []],
  ] as const) {
    const counted = await countedRedis(functions);
    try {
      await loadLibrary(counted.redis, library);
      const sha = (await counted.redis.script("LOAD", baseline.script)) as string;
      const check = decideCommand(new KeyLayout("fginstructions:", 16_384), benchBuckets(), library.decide);
      const decide = perCheck(counted, [check]);
      const each = perCheck(counted, [decideEachCommand(check, CHECKS_EACH, library.decideEach)], CHECKS_EACH);
      const rlf = perCheck(counted, baseline.commands(sha));
      const line = (label: string, n: number) => console.log(`  ${label.padEnd(44)} ${Math.round(n).toLocaleString("en").padStart(9)}`);
      console.log(`${scope}:`);
      line("decide.lua, 1 FCALL", decide);
      line(`decide_each of ${CHECKS_EACH} checks, per check`, each);
      line("rate-limiter-flexible, 3 EVALSHA", rlf);
      console.log(`  decide.lua / rate-limiter-flexible: ${(decide / rlf).toFixed(2)}x; decide_each per check: ${(each / rlf).toFixed(2)}x`);
    } finally {
      await counted.stop();
    }
  }
}

/** One operation of each kind in a loop of LOOP; the script returns the loop's last value. */
const OPERATIONS: Record<string, string> = {
  "an empty loop's iteration": "x = x + i",
  "a call of a Lua function, 2 arguments": "x = f(x, i)",
  "a call of a Lua function, 8 arguments": "x = g(x, i, 1, 2, 3, 4, 5, 6)",
  "a table field read": "x = t.c",
  "a table field write": "t.c = i",
  "math.floor(a / b)": "x = floor(i / 7)",
  "(a - a % b) / b": "x = (i - i % 7) / 7",
  "string.byte(s)": "x = byte(s)",
  "struct.pack('>ddddd', ...)": "x = pack('>ddddd', i, 2, 3, 4, 5)",
  "struct.pack('<ddddd', ...)": "x = pack('<ddddd', i, 2, 3, 4, 5)",
  "struct.pack('<Bddddd', ...)": "x = pack('<Bddddd', 255, i, 2, 3, 4, 5)",
  "struct.unpack('>ddddd', s)": "x = unpack_struct('>ddddd', s)",
  "struct.unpack('<ddddd', s)": "x = unpack_struct('<ddddd', s)",
  "struct.pack('<ddddddddddd', ...), 11 doubles": "x = pack('<ddddddddddd', i, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)",
  "'ab' .. i (a new string)": "x = 'ab' .. i",
};

function costsLibrary(): string {
  const bodies = Object.entries(OPERATIONS).map(
    ([name, statement], i) => `ops[${JSON.stringify(name)}] = function() local x = 0 for i = 1, ${LOOP} do ${statement} end return x end -- ${i}`,
  );
  return [
    "#!lua name=floodgate_costs",
    "local floor, pack, unpack_struct, byte, s",
    "local function f(a, b) return a end",
    "local function g(a, b, c, d, e, f2, g2, h) return a, b end",
    "local t = { a = 1, b = 2, c = 3, d = 4 }",
    "local ops = {}",
    ...bodies,
    "ops.baseline = function() local x = 0 for i = 1, " + LOOP + " do x = x + i end return x end",
    "redis.register_function('floodgate_cost', function(keys, args)",
    "  if not floor then floor, pack, unpack_struct, byte = math.floor, struct.pack, struct.unpack, string.byte; s = pack('>ddddd', 1, 2, 3, 4, 5) end",
    "  ops[args[1]]() return 0",
    "end)",
  ].join("\n");
}

async function costs(): Promise<void> {
  const counted = await countedRedis(["fcallCommand"]);
  try {
    await counted.redis.call("FUNCTION", "LOAD", costsLibrary());
    const per = async (operation: string) => {
      for (let i = 0; i < 5; i++) await counted.redis.call("FCALL", "floodgate_cost", "0", operation);
      counted.zero();
      for (let i = 0; i < 20; i++) await counted.redis.call("FCALL", "floodgate_cost", "0", operation);
      return counted.count() / 20 / LOOP;
    };
    const loop = await per("baseline");
    console.log(`Redis's Lua interpreter, instructions per operation (callgrind, a loop of ${LOOP.toLocaleString("en")}, less the empty loop):`);
    console.log(`  ${"an empty loop's iteration (two operations)".padEnd(48)} ${Math.round(loop).toString().padStart(6)}`);
    for (const operation of Object.keys(OPERATIONS).slice(1)) console.log(`  ${operation.padEnd(48)} ${Math.round((await per(operation)) - loop).toString().padStart(6)}`);
  } finally {
    await counted.stop();
  }
}

await (process.argv.includes("--costs") ? costs() : checks());
