/**
 * npm run client:bench: what the client's batching and refusal cache buy,
 * side by side in one run against one Floodgate (dist/main.js, its own
 * process, counters on this machine's Redis, rules in memory), driven from
 * this process by 32 concurrent callers each awaiting one check after another:
 *
 *   batched      FloodgateClient as it comes (batches, refusal cache)
 *   one by one   the same client with batch.maxSize 1 and no cache: one HTTP
 *                request per check, as a backend without the client would ask
 *   attack       batched, every caller hammering one user far over its limit
 *
 * Rounds alternate the three so that the machine's load falls on each alike;
 * the medians and their ratios are printed. `-- --seconds N --rounds N`.
 */

import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { FloodgateClient, type CheckRequest } from "floodgate/client";
import { startServer } from "./bench/processes.js";
import { ATTACKER, ATTACK_TENANT, caller, TENANT } from "./bench/workload.js";
import { deleteByPrefix } from "../test/harness/delete-by-prefix.js";
import { freePort } from "../test/harness/free-port.js";
import { numberOption } from "../test/harness/number-option.js";

const SECONDS = numberOption("seconds", 5);
const ROUNDS = numberOption("rounds", 3);
const CALLERS = 32;
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const KEY_PREFIX = `fgclientbench:${process.pid}:`;
const TOKEN = `bench-${randomBytes(12).toString("hex")}`;

interface Measured {
  perSecond: number;
  p99Ms: number;
}

const RULES = [TENANT, ATTACK_TENANT].flatMap((tenantId) => [
  `{ tenantId: "${tenantId}", name: "per-user", scope: [USER], resource: "/api/**", limit: ${tenantId === TENANT ? 1_000_000 : 10}, window: 1, windowUnit: ${tenantId === TENANT ? "MINUTES" : "HOURS"} }`,
  `{ tenantId: "${tenantId}", name: "per-ip", scope: [IP], resource: "/api/**", limit: 1000000, window: 1, windowUnit: MINUTES }`,
  `{ tenantId: "${tenantId}", name: "per-endpoint", scope: [ENDPOINT], resource: "/api/**", limit: 1000000000, window: 1, windowUnit: MINUTES }`,
]);

async function measure(client: FloodgateClient, requestOf: (i: number) => CheckRequest): Promise<Measured> {
  const latencies: number[] = [];
  const endAt = performance.now() + SECONDS * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (performance.now() < endAt) {
        const started = performance.now();
        await client.check(requestOf(next++));
        latencies.push(performance.now() - started);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / SECONDS, p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? 0 };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/graphql`;
  const floodgate = await startServer({
    name: "floodgate",
    args: ["dist/main.js"],
    env: { NODE_ENV: "production", LOG_LEVEL: "warn", PORT: String(port), HOST: "127.0.0.1", DATA_DIR: "memory://", REDIS_URL, REDIS_KEY_PREFIX: KEY_PREFIX, ADMIN_TOKEN: TOKEN },
    url,
    readyUrl: `http://127.0.0.1:${port}/readyz`,
  });
  const clients: FloodgateClient[] = [];
  try {
    for (const rule of RULES) {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ query: `mutation { createRule(input: ${rule}) { id } }` }),
      });
      if (!response.ok) throw new Error(`createRule failed: ${await response.text()}`);
    }
    const batched = new FloodgateClient({ url, token: TOKEN, timeoutMs: 5_000 });
    const oneByOne = new FloodgateClient({ url, token: TOKEN, timeoutMs: 5_000, batch: { maxSize: 1 }, cache: false });
    clients.push(batched, oneByOne);
    const normal = (i: number): CheckRequest => ({ tenantId: TENANT, ...caller(i) });
    const attack = (): CheckRequest => ({ tenantId: ATTACK_TENANT, ...ATTACKER });
    // Warm up: the document compiled on the server, connections open, the push channel listening, the attacker over its limit.
    for (const client of [batched, oneByOne]) await measure(client, normal);
    await measure(batched, attack);
    const runs = { batched: [] as Measured[], oneByOne: [] as Measured[], attack: [] as Measured[] };
    for (let round = 0; round < ROUNDS; round++) {
      runs.batched.push(await measure(batched, normal));
      runs.oneByOne.push(await measure(oneByOne, normal));
      runs.attack.push(await measure(batched, attack));
    }
    const row = (name: string, m: Measured[]) =>
      `| ${name} | ${Math.round(median(m.map((r) => r.perSecond))).toLocaleString("en")} | ${median(m.map((r) => r.p99Ms)).toFixed(2)} |`;
    console.log(`\n${CALLERS} callers, ${ROUNDS} rounds of ${SECONDS} s each, medians (load average ${(await import("node:os")).loadavg()[0]!.toFixed(1)})\n`);
    console.log("| run | checks/s | p99 ms |\n|---|---|---|");
    console.log(row("batched (the client)", runs.batched));
    console.log(row("one request per check", runs.oneByOne));
    console.log(row("attack, batched with refusal cache", runs.attack));
    const perSecond = (m: Measured[]) => median(m.map((r) => r.perSecond));
    console.log(`\nbatched / one by one: ${(perSecond(runs.batched) / perSecond(runs.oneByOne)).toFixed(2)}x`);
    console.log(`attack / batched normal: ${(perSecond(runs.attack) / perSecond(runs.batched)).toFixed(2)}x`);
    console.log(`batches: ${batched.stats().batches}, mean size ${batched.stats().meanBatchSize.toFixed(1)}; refusal cache answered ${batched.stats().decisions.refusalCache}`);
  } finally {
    for (const client of clients) await client.close();
    await floodgate.stop();
    const redis = new Redis(REDIS_URL);
    await deleteByPrefix(redis, KEY_PREFIX);
    redis.disconnect();
  }
}

await main();
