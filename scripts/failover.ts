/**
 * What a check costs while Redis dies and comes back: `npm run failover`.
 * Builds and starts the service as its own process on a private redis-server
 * and the machine's Postgres, creates one rule per failure mode, drives it
 * with concurrent callers, kills Redis (SIGKILL) a third of the way in and
 * restarts it two thirds of the way in, then prints latency and decisions for
 * each phase and how long decisions took to return to Redis.
 *
 *   --seconds N    length of the run (default 15)
 *   --callers N    concurrent callers (default 16)
 */

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../test/harness/free-port.js";
import { startOwnRedis } from "../test/harness/redis-server.js";
import { numberOption } from "../test/harness/number-option.js";
import { createScratchDatabase } from "../test/harness/scratch-database.js";

const SECONDS = numberOption("seconds", 15);
const CALLERS = numberOption("callers", 16);
const MODES = ["OPEN", "CLOSED", "LOCAL"] as const;
const TOKEN = `failover-${process.pid}-${Date.now()}-token`;

interface Sample {
  atMs: number;
  latencyMs: number;
  mode: (typeof MODES)[number];
  allowed: boolean;
  degraded: boolean;
}

async function main(): Promise<void> {
  execFileSync("npm", ["run", "build", "--silent"], { stdio: "inherit" });
  const redis = await startOwnRedis();
  const database = await createScratchDatabase("failover");
  const dataDir = mkdtempSync(join(tmpdir(), "floodgate-failover-"));
  const port = await freePort();
  const service = spawn(process.execPath, ["dist/main.js"], {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", REDIS_URL: redis.url, DATABASE_URL: database.url, DATA_DIR: dataDir, LOG_LEVEL: "error", ADMIN_TOKEN: TOKEN },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const endpoint = `http://127.0.0.1:${port}/graphql`;
  try {
    await waitUntilReady(`http://127.0.0.1:${port}/readyz`);
    for (const mode of MODES) {
      await gql(endpoint, `mutation($i: CreateRuleInput!) { createRule(input: $i) { id } }`, {
        i: { tenantId: `failover-${mode}`, name: "per-user", scope: ["USER"], limit: 1000, window: 1, failureMode: mode },
      });
    }
    const samples: Sample[] = [];
    const started = performance.now();
    const killAt = (SECONDS * 1000) / 3;
    const restartAt = (2 * SECONDS * 1000) / 3;
    let restartedAt = Number.POSITIVE_INFINITY;
    const chaos = (async () => {
      await sleep(killAt);
      await redis.kill();
      console.log(`failover: Redis killed at ${(performance.now() - started).toFixed(0)} ms`);
      await sleep(restartAt - (performance.now() - started));
      await redis.restart();
      restartedAt = performance.now() - started;
      console.log(`failover: Redis restarted at ${restartedAt.toFixed(0)} ms`);
    })();
    let n = 0;
    const caller = async () => {
      while (performance.now() - started < SECONDS * 1000) {
        const mode = MODES[n++ % MODES.length]!;
        const sent = performance.now();
        const data = (await gql(endpoint, `query($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed degraded } }`, {
          r: { tenantId: `failover-${mode}`, userId: `u${n % 50}` },
        })) as { checkLimits: { allowed: boolean; degraded: boolean } };
        const now = performance.now();
        samples.push({ atMs: sent - started, latencyMs: now - sent, mode, ...data.checkLimits });
      }
    };
    await Promise.all([chaos, ...Array.from({ length: CALLERS }, caller)]);
    report(samples, killAt, restartAt, restartedAt);
  } finally {
    service.kill("SIGTERM");
    await new Promise((resolve) => service.once("exit", resolve));
    await redis.stop();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function report(samples: Sample[], killAt: number, restartAt: number, restartedAt: number): void {
  const phases: [string, Sample[]][] = [
    ["before", samples.filter((s) => s.atMs < killAt)],
    ["Redis down", samples.filter((s) => s.atMs >= killAt && s.atMs < restartAt)],
    ["after restart", samples.filter((s) => s.atMs >= restartAt)],
  ];
  console.log(`failover: ${samples.length} checks, ${CALLERS} concurrent callers, ${SECONDS} s`);
  console.log("phase          checks   p50 ms   p99 ms   max ms   degraded   OPEN allowed   CLOSED allowed   LOCAL allowed");
  for (const [name, list] of phases) {
    const latencies = list.map((s) => s.latencyMs).sort((a, b) => a - b);
    const q = (p: number) => (latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0).toFixed(1);
    const share = (mode: string) => {
      const of = list.filter((s) => s.mode === mode);
      return `${of.filter((s) => s.allowed).length}/${of.length}`;
    };
    console.log(
      [
        name.padEnd(13),
        String(list.length).padStart(7),
        q(0.5).padStart(8),
        q(0.99).padStart(8),
        (latencies.at(-1) ?? 0).toFixed(1).padStart(8),
        String(list.filter((s) => s.degraded).length).padStart(10),
        share("OPEN").padStart(14),
        share("CLOSED").padStart(16),
        share("LOCAL").padStart(15),
      ].join(" "),
    );
  }
  const firstBack = samples.filter((s) => s.atMs >= restartedAt && !s.degraded).sort((a, b) => a.atMs - b.atMs)[0];
  const lastDegraded = samples.filter((s) => s.degraded).sort((a, b) => b.atMs - a.atMs)[0];
  if (firstBack) console.log(`failover: first check decided by Redis again ${(firstBack.atMs - restartedAt).toFixed(0)} ms after the restart`);
  if (lastDegraded) console.log(`failover: last degraded check sent ${(lastDegraded.atMs - restartedAt).toFixed(0)} ms after the restart`);
}

async function gql(url: string, query: string, variables: unknown): Promise<unknown> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: unknown; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

async function waitUntilReady(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error("the service did not become ready");
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

await main();
