/**
 * Machine instructions the Floodgate server executes per check, counted by
 * valgrind's callgrind: `npm run server:instructions -- [--single] [build ...]`.
 * On a shared two-core machine the server's CPU time per check moves by a
 * third between runs of the same build; its instruction count moves by about
 * a percent, so it shows what a change to the decision path buys where time
 * cannot (it does not see what memory stalls cost: the bench's time does).
 *
 * Each build (a directory holding dist/, lua/, prisma/, package.json and
 * node_modules, as a checkout has after `npm run build`; default: this one)
 * is measured twice, the builds in turn: `node dist/main.js` with npm start's
 * node flags under callgrind, on the machine's Redis and a scratch Postgres
 * holding the bench's rules, sent the bench's checkLimitsBatch of 100 on 4
 * connections (`--single`: its single checks on 32; `--client`: its single
 * checks through one FloodgateClient with 32 callers, which sends them as
 * the client does, 16 a request in two requests in flight), a warm-up and
 * then the counted checks. The count is the main thread's (the event loop,
 * where the server's work is done) and all threads' (V8's and libuv's helpers
 * too), per check.
 *
 * Callgrind runs the server about fifteen times slower, so the settings that
 * would make the count depend on time are pinned: the Redis deadline (50 ms
 * would fail checks and count their failure modes), the usage flush and the
 * rule reload (periodic work, counted in proportion to the run's length).
 *
 * Needs valgrind (Debian's package); a few minutes a build.
 */

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Redis } from "ioredis";
import { nodeFlagsOfStart, waitUntilReady } from "./bench/processes.js";
import { seededDatabase } from "./bench/seeded-database.js";
import { CALLERS, TENANT, checkInput, floodgateBatchBody, floodgateBody, ruleSet } from "./bench/workload.js";
import { FloodgateClient } from "../src/client/index.js";
import { deleteByPrefix } from "../test/harness/delete-by-prefix.js";
import { freePort } from "../test/harness/free-port.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const TOKEN = `instructions-${process.pid}-${Date.now()}`;
const KEY_PREFIX = `fginstr:${process.pid}:`;
const ROUNDS = 2;
const READY_TIMEOUT_MS = 300_000;
/** Floodgate's HOST; valgrind names its control files after the HOST of its environment, so callgrind_control is given the same. */
const HOST = "127.0.0.1";

const single = process.argv.includes("--single");
const throughClient = process.argv.includes("--client");
const builds = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));

interface Workload {
  name: string;
  checksPerRequest: number;
  /** Requests, or for the client checks, before counting and counted. */
  warmUp: number;
  measured: number;
  /** Sends this many of them to the server at url, each answered without errors. */
  send(url: string, count: number): Promise<void>;
}

const workload: Workload = throughClient
  ? { name: "single checks through one FloodgateClient, 32 callers", checksPerRequest: 1, warmUp: 8_000, measured: 8_000, send: sendThroughClient }
  : single
    ? { name: "single check, 32 connections", checksPerRequest: 1, warmUp: 4_000, measured: 4_000, send: sendBodies(CALLERS.map((c) => floodgateBody(TENANT, c)), 32) }
    : {
        name: "checkLimitsBatch of 100, 4 connections",
        checksPerRequest: 100,
        warmUp: 400,
        measured: 400,
        send: sendBodies(
          Array.from({ length: CALLERS.length / 100 }, (_, i) => floodgateBatchBody(CALLERS.slice(i * 100, (i + 1) * 100))),
          4,
        ),
      };

interface Counted {
  mainThread: number;
  allThreads: number;
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const database = await seededDatabase("instructions", ruleSet(10), cleanups);
    const dirs = builds.length === 0 ? [process.cwd()] : builds.map((build) => resolve(build));
    console.log(`instructions the server executes per check (callgrind): ${workload.name}, ${workload.measured * workload.checksPerRequest} checks counted after ${workload.warmUp * workload.checksPerRequest}`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const dir of dirs) {
        const { mainThread, allThreads } = await countServer(dir, database.url);
        console.log(`  round ${round}  ${dir}: main thread ${perCheck(mainThread)}, all threads ${perCheck(allThreads)}`);
      }
    }
  } finally {
    const redis = new Redis(REDIS_URL);
    await deleteByPrefix(redis, KEY_PREFIX);
    redis.disconnect();
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

function perCheck(instructions: number): string {
  return Math.round(instructions / (workload.measured * workload.checksPerRequest)).toLocaleString("en");
}

/** One server of the build under callgrind: warmed up, counted while it answers the measured requests, stopped. */
async function countServer(dir: string, databaseUrl: string): Promise<Counted> {
  const port = await freePort();
  const out = mkdtempSync(join(tmpdir(), "floodgate-server-callgrind-"));
  const child = spawn(
    "valgrind",
    ["--tool=callgrind", "--instr-atstart=no", "--smc-check=all-non-file", "--separate-threads=yes", `--callgrind-out-file=${out}/callgrind.out`, process.execPath, ...nodeFlagsOfStart(), join(dir, "dist/main.js")],
    {
      cwd: dir,
      env: {
        ...process.env,
        NODE_ENV: "production",
        LOG_LEVEL: "warn",
        HOST,
        PORT: String(port),
        DATABASE_URL: databaseUrl,
        DATA_DIR: "memory://",
        REDIS_URL,
        REDIS_KEY_PREFIX: KEY_PREFIX,
        ADMIN_TOKEN: TOKEN,
        REDIS_TIMEOUT_MS: "60000",
        USAGE_FLUSH_MS: "60000",
        RULE_RELOAD_MS: "86400000",
      },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let output = "";
  child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString("utf8")).slice(-4000)));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const instrumentation = (state: "on" | "off") => execFileSync("callgrind_control", ["--instr", state, String(child.pid)], { env: { ...process.env, HOST }, stdio: "ignore" });
  try {
    const url = `http://${HOST}:${port}/graphql`;
    await waitUntilReady(`http://${HOST}:${port}/readyz`, exited, READY_TIMEOUT_MS).catch((error: Error) => {
      throw new Error(`${error.message}\n${output}`);
    });
    await workload.send(url, workload.warmUp);
    instrumentation("on");
    await workload.send(url, workload.measured);
    instrumentation("off");
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
  try {
    // --separate-threads: callgrind.out-01 is the main thread's, the others its helpers'.
    const threads = readdirSync(out)
      .filter((name) => name.startsWith("callgrind.out-"))
      .sort()
      .map((name) => Number(/^totals: (\d+)/m.exec(readFileSync(join(out, name), "utf8"))?.[1] ?? 0));
    if (threads.length === 0) throw new Error(`callgrind wrote nothing in ${out}:\n${output}`);
    return { mainThread: threads[0]!, allThreads: threads.reduce((sum, n) => sum + n, 0) };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

let next = 0;

/** Posts the bodies in turn on `connections` connections. */
function sendBodies(bodies: readonly string[], connections: number): Workload["send"] {
  return async (url, requests) => {
    let left = requests;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (left-- > 0) {
          const response = await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
            body: bodies[next++ % bodies.length]!,
          });
          const text = await response.text();
          if (!response.ok || text.includes('"errors"')) throw new Error(`the server answered ${response.status}: ${text.slice(0, 300)}`);
        }
      }),
    );
  };
}

const CLIENT_CALLERS = 32;

/** The checks through a FloodgateClient as the bench's client rows send them; a check its failure mode decided is an error (Floodgate did not answer). */
async function sendThroughClient(url: string, checks: number): Promise<void> {
  const client = new FloodgateClient({ url, token: TOKEN, timeoutMs: 600_000, cache: false });
  let left = checks;
  try {
    await Promise.all(
      Array.from({ length: CLIENT_CALLERS }, async () => {
        while (left-- > 0) {
          const decision = await client.check(checkInput(TENANT, CALLERS[next++ % CALLERS.length]!));
          if (decision.source === "CLIENT_FAILURE_MODE") throw new Error("a check was decided by the client's failure mode: Floodgate did not answer");
        }
      }),
    );
  } finally {
    await client.close();
  }
}

await main();
