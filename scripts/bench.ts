/**
 * The benchmark: `npm run bench` (full, a few minutes) or `npm run bench --
 * --smoke` (the CI smoke: seconds; it only shows that the harness runs).
 *
 * It starts, each in a process of its own and on this machine's Redis and
 * Postgres, Floodgate (dist/main.js with npm start's node flags, NODE_ENV=production) with 10 rules,
 * Floodgate with 10,000 rules, Floodgate with 100,000 overrides on one of its
 * rules, Floodgate with its over-limit cache off, Floodgate with usage
 * counting off (USAGE_FLUSH_MS=0: what the dashboard's charts cost the check
 * path is the difference), and the baseline (scripts/bench/baseline-server.ts, rate-limiter-flexible).
 * One load generator (autocannon, loopback) drives them one at a time; the
 * client rows are driven instead by FloodgateClients in one process of its
 * own (scripts/bench/client-driver.ts), its callers each awaiting
 * `client.check` in a loop, against the same Floodgate, and the gRPC row by
 * one grpc-js channel to its GRPC_PORT, 32 calls in flight, as an Envoy
 * would ask Envoy's rate limit service (scripts/bench/grpc-load.ts). While a
 * scenario runs, the servers it does not use are paused (see `bystanders`). The scenarios are
 * interleaved round after round so that drift in the machine's load falls on
 * all of them alike; each figure of the table is the median over the rounds,
 * after one short warm-up run of every scenario, and each ratio of the goals
 * the median of the rounds' ratios (two scenarios of one round run a minute
 * or two apart at most; the medians of a run can fall minutes apart). One of
 * the rounds' scenarios is the ceiling, decide.lua alone pipelined by
 * redis-benchmark, measured just before checkLimitsBatch in every round, so
 * that the batch's share of it compares runs seconds apart.
 *
 * `npm run bench -- --overrides` runs only the plain single check beside the
 * one with 100,000 overrides, and prints their ratio; `npm run bench --
 * --client` only the client's rows beside the single check of Floodgate and
 * of the baseline at 32 connections, and the client's goal (for working on
 * the client: a short run that answers one question); `npm run bench --
 * --batch` only checkLimitsBatch, on one instance and on two, beside the
 * Redis ceiling, and their shares of it.
 *
 * Settings: REDIS_URL and DATABASE_URL (defaults: this machine's services),
 * BENCH_SECONDS (per run), BENCH_ROUNDS, and BENCH_PROFILE_DIR (each process
 * it starts writes a CPU profile there). It prints the table, the ratios
 * and the goals; it never fails on a figure (performance is judged by people
 * reading the table, not by an exit code).
 */

import { cpus, loadavg } from "node:os";
import { Redis } from "ioredis";
import { compileRule } from "../src/engine/decision/compiled-rule.js";
import { RuleIndex } from "../src/engine/decision/rule-index.js";
import { KeyLayout } from "../src/store/redis/key-layout.js";
import { NO_ATTRIBUTES } from "../src/domain/attributes.js";
import type { CheckRequest } from "../src/domain/request.js";
import type { Rule } from "../src/domain/rule.js";
import { redisCeiling } from "./bench/ceiling.js";
import { startClientDriver, type ClientProcess, type ClientRunResult, type ClientWorkload } from "./bench/client-process.js";
import { driveGrpc } from "./bench/grpc-load.js";
import { driveHotBucket, type HotBucketRun } from "./bench/hot-bucket.js";
import { drive, type LoadResult } from "./bench/load.js";
import { localRedisCpu, nodeFlagsOfStart, startServer, type ServerProcess } from "./bench/processes.js";
import { seededDatabase } from "./bench/seeded-database.js";
import {
  ATTACK_TENANT,
  ATTACKER,
  CALLERS,
  TENANT,
  baselineBody,
  floodgateBatchBody,
  floodgateBody,
  hotBucketRule,
  HOT_BUCKET,
  overridesOfPerUser,
  ruleSet,
  type Caller,
} from "./bench/workload.js";
import { deleteByPrefix } from "../test/harness/delete-by-prefix.js";
import { freePort } from "../test/harness/free-port.js";

const smoke = process.argv.includes("--smoke");
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
/** Every request to Floodgate carries a token, as any client must (the baseline ignores it). */
const TOKEN = `bench-${process.pid}-${Date.now()}`;
const AUTHORIZATION = { authorization: `Bearer ${TOKEN}` };
const SECONDS = Number(process.env.BENCH_SECONDS ?? (smoke ? 0.3 : 5));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (smoke ? 1 : 3));
const MANY_RULES = smoke ? 500 : 10_000;
const MANY_OVERRIDES = smoke ? 5_000 : 100_000;
/** `--overrides`: only the plain single check beside the one whose rule has MANY_OVERRIDES overrides. */
const overridesOnly = process.argv.includes("--overrides");
/** `--client`: only the client's rows beside the single checks at 32 connections. */
const clientOnly = process.argv.includes("--client");
/** `--batch`: only checkLimitsBatch beside the Redis ceiling. */
const batchOnly = process.argv.includes("--batch");
/** The node flags `npm start` runs Floodgate with (package.json): the bench runs both servers with them. */
const START_FLAGS = nodeFlagsOfStart();
const FEW_RULES = 10;
const BATCH = 100;
const CONNECTIONS = [1, 8, 32];
const BATCH_CONNECTIONS = 4;
const CLIENT_CALLERS = 32;
const GRPC_STREAMS = 32;
const CEILING_REQUESTS = smoke ? 10_000 : 200_000;
const KEY_PREFIX = `fgbench:${process.pid}:`;
const BASELINE_PREFIX = `rlfbench:${process.pid}:`;

interface Scenario {
  name: string;
  server: ServerProcess;
  /** autocannon's connections, or the client's concurrent callers. */
  connections: number;
  decisionsPerRequest: number;
  /** The server processes the run drives, when not only `server`: none of them is paused for it. */
  uses?: readonly ServerProcess[];
  /** The run's figures; generatorCpuMs: the CPU its load generator used when that is not this process (the client's). */
  drive(seconds: number): Promise<LoadResult & { generatorCpuMs?: number }>;
}

interface Servers {
  floodgate: ServerProcess;
  floodgateMany: ServerProcess;
  floodgateOverrides: ServerProcess;
  floodgateNoCache: ServerProcess;
  floodgateNoUsage: ServerProcess;
  baseline: ServerProcess;
}

interface Measured {
  decisionsPerSecond: number;
  p50: number;
  p99: number;
  p999: number;
  cpuUsPerDecision: number;
  /** Redis's CPU per decision over the run (NaN for a Redis on another machine). */
  redisUsPerDecision: number;
  /** The load generator's (autocannon or the gRPC channel in this process, or the client's process). */
  generatorUsPerDecision: number;
  failures: number;
}

/** A scenario's runs, one a round, in the order of the rounds. */
type Rounds = Map<Scenario, Measured[]>;

/** Set once the bench knows its Redis: that Redis's CPU time so far, when it runs on this machine. */
let redisCpuMs: (() => number) | null = null;

/**
 * The servers the bench pauses while it runs a scenario that does not use
 * them (ServerProcess.pause): on two cores, idle servers' wakeups showed in
 * the measured one's latencies. Every server it starts, but the one the
 * client process holds its invalidation subscription on: paused, that server
 * would miss the client's pings, and the client would drop its refusal cache.
 */
const bystanders: ServerProcess[] = [];

/** Pauses the bystanders a scenario does not use, then resumes those it does. */
async function onlyWhatRuns(scenario: Scenario): Promise<void> {
  const used = scenario.uses ?? [scenario.server];
  for (const server of bystanders) if (!used.includes(server)) server.pause();
  for (const server of used) if (bystanders.includes(server)) await server.resume();
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  const redis = new Redis(REDIS_URL, { lazyConnect: true });
  await redis.connect();
  redisCpuMs = localRedisCpu(await redis.info("server"));
  cleanups.push(async () => {
    for (const prefix of [KEY_PREFIX, BASELINE_PREFIX]) await deleteByPrefix(redis, prefix);
    redis.disconnect();
  });
  try {
    const fewRules = ruleSet(FEW_RULES);
    const few = await seededDatabase("bench_few", fewRules, cleanups);
    const floodgateBodies = CALLERS.map((c) => floodgateBody(TENANT, c));
    if (clientOnly) return await compareClient(few.url, floodgateBodies, cleanups);
    if (batchOnly) return await compareBatch(redis, few.url, fewRules, cleanups);
    const overridden = await seededDatabase("bench_overrides", fewRules, cleanups, overridesOfPerUser(fewRules, MANY_OVERRIDES));
    if (overridesOnly) return await compareOverrides(few.url, overridden.url, floodgateBodies, cleanups);
    const many = await seededDatabase("bench_many", ruleSet(MANY_RULES), cleanups);
    const grpcPort = await freePort();
    const [floodgate, floodgateMany, floodgateOverrides, floodgateNoCache, floodgateNoUsage, baseline] = await Promise.all([
      startFloodgate("floodgate", few.url, { GRPC_PORT: String(grpcPort), GRPC_HOST: "127.0.0.1" }),
      startFloodgate(`floodgate, ${MANY_RULES.toLocaleString("en")} rules`, many.url, {}),
      startFloodgate(`floodgate, ${MANY_OVERRIDES.toLocaleString("en")} overrides on one rule`, overridden.url, {}),
      startFloodgate("floodgate, over-limit cache off", few.url, { OVER_LIMIT_CACHE_SIZE: "0" }),
      startFloodgate("floodgate, usage counting off", few.url, { USAGE_FLUSH_MS: "0" }),
      startBaseline(),
    ]);
    const servers: Servers = { floodgate, floodgateMany, floodgateOverrides, floodgateNoCache, floodgateNoUsage, baseline };
    cleanups.push(() => Promise.all(Object.values(servers).map((s) => s.stop())));
    bystanders.push(floodgateMany, floodgateOverrides, floodgateNoCache, floodgateNoUsage, baseline);

    const batches = batchBodies();
    const attack = [floodgateBody(ATTACK_TENANT, ATTACKER)];
    await expectDecision(floodgate, floodgateBodies[0]!, true);
    await expectDecision(floodgateMany, floodgateBodies[0]!, true);
    await expectDecision(floodgateOverrides, floodgateBodies[0]!, true);
    await expectDecision(baseline, baselineBody(CALLERS[0]!), true);
    for (let i = 0; i < 11; i++) await post(floodgate, attack[0]!);
    await expectDecision(floodgate, attack[0]!, false);
    const client = await startClientDriver({ url: floodgate.url, token: TOKEN });
    cleanups.push(() => client.stop());
    const clientRuns = new Map<ClientWorkload, ClientRunResult[]>([
      ["normal", []],
      ["normal, one request a batch", []],
      ["attack", []],
    ]);
    const viaClient = (name: string, workload: ClientWorkload) => clientScenario(name, floodgate, client, workload, clientRuns.get(workload)!);

    const ceiling = ceilingScenario(redis, fewRules);
    // The client's rows follow the baseline at 32 connections, which their goal compares them with: on a
    // shared host the machine's speed moves within a minute, and the rows between them took one.
    const scenarios: Scenario[] = [
      ...CONNECTIONS.flatMap((connections) => [
        http("single check", floodgate, connections, floodgateBodies),
        http("single check", baseline, connections, CALLERS.map(baselineBody)),
      ]),
      viaClient(`client, ${CLIENT_CALLERS} concurrent callers`, "normal"),
      viaClient(`client, ${CLIENT_CALLERS} callers, batch.parallel 1`, "normal, one request a batch"),
      viaClient("client, attack on one key", "attack"),
      http("single check", floodgateMany, 32, floodgateBodies),
      http("single check", floodgateOverrides, 32, floodgateBodies),
      http("single check", floodgateNoUsage, 32, floodgateBodies),
      grpc(`gRPC ShouldRateLimit, ${GRPC_STREAMS} concurrent streams`, floodgate, `127.0.0.1:${grpcPort}`),
      ceiling,
      http(`checkLimitsBatch of ${BATCH}`, floodgate, BATCH_CONNECTIONS, batches, BATCH),
      http("attack on one key over its limit", floodgate, 32, attack),
      http("attack on one key over its limit", floodgateNoCache, 32, attack),
    ];

    console.log(header());
    const rounds = await measureInRounds(scenarios, () => {
      // The client's batching figures are the measured rounds', not the warm-up's.
      for (const runs of clientRuns.values()) runs.length = 0;
    });

    console.log(table(medians(rounds)));
    console.log(clientNote(clientRuns));
    console.log(goals(rounds, servers, ceiling));
    for (const server of Object.values(servers)) await server.stop();
    console.log(hotBucketTable(await hotBucketRuns(cleanups)));
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error: unknown) => console.error("bench: cleanup failed:", error));
  }
}

function batchBodies(): string[] {
  return Array.from({ length: 200 }, (_, i) => floodgateBatchBody(CALLERS.slice(i * BATCH, (i + 1) * BATCH)));
}

/** What the ceiling's row names as its server: redis-benchmark, whose CPU the bench does not read (Redis's it does). */
const REDIS_BENCHMARK: ServerProcess = { name: "redis-benchmark, decide.lua alone", url: REDIS_URL, cpuMs: () => NaN, pause: () => {}, resume: async () => {}, stop: async () => {} };

/**
 * The ceiling as a scenario of the rounds: redis-benchmark (-c 32 -P 16)
 * sending decide.lua with a bench check's keys and arguments, the decisions/s
 * Redis alone can make. Its latencies are redis-benchmark's pipelines', not a
 * caller's, so the row shows none.
 */
function ceilingScenario(redis: Redis, rules: readonly Rule[]): Scenario {
  const request = requestOf(CALLERS[0]!);
  const buckets = new RuleIndex(rules.map(compileRule)).match(request).map((c) => ({ ruleId: c.rule.id, key: c.keyOf(request)!, params: c.params }));
  return {
    name: "the ceiling",
    server: REDIS_BENCHMARK,
    connections: 32,
    decisionsPerRequest: 1,
    drive: async () => {
      const requestsPerSecond = await redisCeiling({ redis, redisUrl: REDIS_URL, layout: new KeyLayout(KEY_PREFIX, 16_384), buckets, requests: CEILING_REQUESTS });
      return { requestsPerSecond, p50: NaN, p99: NaN, p999: NaN, requests: CEILING_REQUESTS, failures: 0, generatorCpuMs: NaN };
    },
  };
}

/** Of two scenarios, the ratio of their decisions/s in each round, in the order of the rounds. */
function ratiosByRound(rounds: Rounds, a: Scenario, b: Scenario): number[] {
  const bs = rounds.get(b)!;
  return rounds.get(a)!.map((m, i) => m.decisionsPerSecond / bs[i]!.decisionsPerSecond);
}

/** A's decisions/s against b's, round by round: the median of the rounds' ratios, and its text with each round's. */
function pairedRatio(rounds: Rounds, a: Scenario, b: Scenario): { median: number; text: string } {
  const ratios = ratiosByRound(rounds, a, b);
  const median = middle(ratios);
  const times = (r: number) => `${fmt(r, 2)}x`;
  return { median, text: `${times(median)}${eachRound(ratios, times)}` };
}

/** Each round's figure, in brackets after the median's, when there was more than one round. */
function eachRound(figures: readonly number[], format: (figure: number) => string): string {
  return figures.length === 1 ? "" : ` [${figures.map(format).join(", ")}]`;
}

/**
 * A row's share of the ceiling measured next to it, round by round: the
 * median of the rounds' shares (the goal's figure), and each round's.
 */
function shareOfCeiling(rounds: Rounds, row: Scenario, ceiling: Scenario): { median: number; text: string } {
  const shares = ratiosByRound(rounds, row, ceiling);
  const median = middle(shares);
  const round = shares.indexOf(median);
  const percent = (share: number) => `${fmt(100 * share, 0)}%`;
  return {
    median,
    text: `${percent(median)} (${fmt(rounds.get(row)![round]!.decisionsPerSecond, 0)} of ${fmt(rounds.get(ceiling)![round]!.decisionsPerSecond, 0)})${eachRound(shares, percent)}`,
  };
}

/**
 * `npm run bench -- --batch`: checkLimitsBatch of BATCH on one instance and on
 * two sharing the same connections, in rounds, and their shares of the Redis
 * ceiling measured between them: whether one server process or the machine is
 * the bound.
 */
async function compareBatch(redis: Redis, databaseUrl: string, rules: Rule[], cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const [floodgate, second] = await Promise.all([startFloodgate("floodgate", databaseUrl, {}), startFloodgate("floodgate", databaseUrl, {})]);
  cleanups.push(() => Promise.all([floodgate.stop(), second.stop()]));
  bystanders.push(floodgate, second);
  const bodies = batchBodies();
  const ceiling = ceilingScenario(redis, rules);
  const one = http(`checkLimitsBatch of ${BATCH}`, floodgate, BATCH_CONNECTIONS, bodies, BATCH);
  const both = instancesOf("floodgate, 2 instances", [floodgate, second]);
  const two: Scenario = {
    ...one,
    server: both,
    uses: [floodgate, second],
    drive: (seconds) => drive({ url: [floodgate.url, second.url], connections: BATCH_CONNECTIONS, seconds, bodies, headers: AUTHORIZATION }),
  };
  console.log(header());
  // The ceiling between the two rows: each share compares runs seconds apart.
  const rounds = await measureInRounds([one, ceiling, two]);
  console.log(table(medians(rounds)));
  console.log(
    `\ncheckLimitsBatch of ${BATCH}, its share of the ceiling (goal >= 60%), the median of the rounds' [each round's]: ${shareOfCeiling(rounds, one, ceiling).text}; on 2 instances ${shareOfCeiling(rounds, two, ceiling).text}`,
  );
}

/** Instances as one server of the table: their URLs share the load, their CPU is added up. */
function instancesOf(name: string, servers: readonly ServerProcess[]): ServerProcess {
  return {
    name,
    url: servers[0]!.url,
    cpuMs: () => servers.reduce((sum, server) => sum + server.cpuMs(), 0),
    pause: () => servers.forEach((server) => server.pause()),
    resume: async () => {
      for (const server of servers) await server.resume();
    },
    stop: async () => {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}

/**
 * `npm run bench -- --overrides`: the plain single check and the one whose
 * per-user rule has MANY_OVERRIDES overrides, at 32 connections, interleaved
 * round after round, and the ratio of the two.
 */
async function compareOverrides(plainUrl: string, overriddenUrl: string, bodies: string[], cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const [plain, overridden] = await Promise.all([
    startFloodgate("floodgate", plainUrl, {}),
    startFloodgate(`floodgate, ${MANY_OVERRIDES.toLocaleString("en")} overrides on one rule`, overriddenUrl, {}),
  ]);
  cleanups.push(() => Promise.all([plain.stop(), overridden.stop()]));
  bystanders.push(plain, overridden);
  for (const server of [plain, overridden]) await expectDecision(server, bodies[0]!, true);
  const [a, b] = [http("single check", plain, 32, bodies), http("single check", overridden, 32, bodies)];
  console.log(header());
  const rounds = await measureInRounds([a, b]);
  const results = medians(rounds);
  console.log(table(results));
  console.log(
    `\n${MANY_OVERRIDES.toLocaleString("en")} overrides on one rule: ${pairedRatio(rounds, b, a).text} the plain check's decisions/s (the median of the rounds' [each round's]), ${fmt(results.get(b)!.cpuUsPerDecision / results.get(a)!.cpuUsPerDecision, 2)}x its CPU per decision`,
  );
}

/**
 * `npm run bench -- --client`: the client's two rows for normal checks beside
 * the single check of Floodgate and of the baseline at 32 connections,
 * interleaved round after round, and the client's goal.
 */
async function compareClient(databaseUrl: string, bodies: string[], cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const [floodgate, baseline] = await Promise.all([startFloodgate("floodgate", databaseUrl, {}), startBaseline()]);
  cleanups.push(() => Promise.all([floodgate.stop(), baseline.stop()]));
  bystanders.push(baseline);
  await expectDecision(floodgate, bodies[0]!, true);
  await expectDecision(baseline, baselineBody(CALLERS[0]!), true);
  const client = await startClientDriver({ url: floodgate.url, token: TOKEN });
  cleanups.push(() => client.stop());
  const clientRuns = new Map<ClientWorkload, ClientRunResult[]>([
    ["normal", []],
    ["normal, one request a batch", []],
  ]);
  const base32 = http("single check", baseline, 32, CALLERS.map(baselineBody));
  const viaClient = clientScenario(`client, ${CLIENT_CALLERS} concurrent callers`, floodgate, client, "normal", clientRuns.get("normal")!);
  const scenarios = [
    http("single check", floodgate, 32, bodies),
    base32,
    viaClient,
    clientScenario(`client, ${CLIENT_CALLERS} callers, batch.parallel 1`, floodgate, client, "normal, one request a batch", clientRuns.get("normal, one request a batch")!),
  ];
  console.log(header());
  const rounds = await measureInRounds(scenarios, () => {
    for (const runs of clientRuns.values()) runs.length = 0;
  });
  const results = medians(rounds);
  console.log(table(results));
  for (const [workload, runs] of clientRuns) console.log(`client, ${workload}: ${batchingOf(runs)}`);
  const [c, b] = [results.get(viaClient)!, results.get(base32)!];
  const paired = pairedRatio(rounds, viaClient, base32);
  console.log(
    `\nclient, ${CLIENT_CALLERS} concurrent callers: ${paired.text} the baseline's decisions/s (the median of the rounds' [each round's]), p99 ${fmt(c.p99, 2)} vs ${fmt(b.p99, 2)} ms (goal >= 1.50x, p99 no worse: ${paired.median >= 1.5 && c.p99 <= b.p99 ? "met" : "NOT met"})`,
  );
}

/** One short warm-up run of every scenario, then ROUNDS rounds of all of them in turn: each scenario's runs. */
async function measureInRounds(scenarios: readonly Scenario[], afterWarmUp: () => void = () => {}): Promise<Rounds> {
  for (const scenario of scenarios) {
    await onlyWhatRuns(scenario);
    await scenario.drive(Math.min(SECONDS, 2));
  }
  afterWarmUp();
  const rounds = new Map<Scenario, Measured[]>(scenarios.map((s) => [s, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of scenarios) rounds.get(scenario)!.push(await measure(scenario));
    process.stderr.write(`bench: round ${round} of ${ROUNDS} done\n`);
  }
  return rounds;
}

/** Each scenario's median run (each figure's median over the rounds on its own). */
function medians(rounds: Rounds): Map<Scenario, Measured> {
  return new Map([...rounds].map(([scenario, runs]) => [scenario, median(runs)]));
}

/** autocannon sending `bodies` round-robin, each request carrying `decisionsPerRequest` checks. */
function http(name: string, server: ServerProcess, connections: number, bodies: string[], decisionsPerRequest = 1): Scenario {
  return {
    name,
    server,
    connections,
    decisionsPerRequest,
    drive: (seconds) => drive({ url: server.url, connections, seconds, bodies, headers: AUTHORIZATION }),
  };
}

/** Envoy's rate limit service: one channel, GRPC_STREAMS calls in flight, each a descriptor like a single check (scripts/bench/grpc-load.ts). */
function grpc(name: string, server: ServerProcess, address: string): Scenario {
  return {
    name,
    server,
    connections: GRPC_STREAMS,
    decisionsPerRequest: 1,
    drive: (seconds) => driveGrpc({ address, token: TOKEN, domain: TENANT, streams: GRPC_STREAMS, seconds, callers: CALLERS }),
  };
}

/** The client process's callers, each awaiting `client.check` in a loop; each run's batching figures go to `runs`. */
function clientScenario(name: string, server: ServerProcess, client: ClientProcess, workload: ClientWorkload, runs: ClientRunResult[]): Scenario {
  return {
    name,
    server,
    connections: CLIENT_CALLERS,
    decisionsPerRequest: 1,
    drive: async (seconds) => {
      const run = await client.run({ workload, callers: CLIENT_CALLERS, seconds });
      runs.push(run);
      return { ...run.load, generatorCpuMs: (run.cpuUsPerCheck * (run.load.requests + run.load.failures)) / 1000 };
    },
  };
}

async function measure(scenario: Scenario): Promise<Measured> {
  await onlyWhatRuns(scenario);
  const cpuBefore = scenario.server.cpuMs();
  const redisBefore = redisCpuMs?.() ?? NaN;
  const ownBefore = process.cpuUsage();
  const load = await scenario.drive(SECONDS);
  const own = process.cpuUsage(ownBefore);
  const cpuMs = scenario.server.cpuMs() - cpuBefore;
  const redisMs = (redisCpuMs?.() ?? NaN) - redisBefore;
  const generatorMs = load.generatorCpuMs ?? (own.user + own.system) / 1000;
  const decisions = load.requests * scenario.decisionsPerRequest;
  const perDecision = (ms: number) => (decisions === 0 ? NaN : (ms * 1000) / decisions);
  return {
    decisionsPerSecond: load.requestsPerSecond * scenario.decisionsPerRequest,
    p50: load.p50,
    p99: load.p99,
    p999: load.p999,
    cpuUsPerDecision: perDecision(cpuMs),
    redisUsPerDecision: perDecision(redisMs),
    generatorUsPerDecision: perDecision(generatorMs),
    failures: load.failures,
  };
}

function median(runs: readonly Measured[]): Measured {
  const of = (pick: (m: Measured) => number) => middle(runs.map(pick));
  return {
    decisionsPerSecond: of((m) => m.decisionsPerSecond),
    p50: of((m) => m.p50),
    p99: of((m) => m.p99),
    p999: of((m) => m.p999),
    cpuUsPerDecision: of((m) => m.cpuUsPerDecision),
    redisUsPerDecision: of((m) => m.redisUsPerDecision),
    generatorUsPerDecision: of((m) => m.generatorUsPerDecision),
    failures: runs.reduce((sum, m) => sum + m.failures, 0),
  };
}

/** The median of some figures (the lower middle one of an even number). */
function middle(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

async function startFloodgate(name: string, databaseUrl: string, env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name,
    args: [...START_FLAGS, "dist/main.js"],
    env: {
      NODE_ENV: "production",
      LOG_LEVEL: "warn",
      PORT: String(port),
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      // No rule snapshot: the scratch database's rules have no business in the checkout's DATA_DIR.
      DATA_DIR: "memory://",
      REDIS_URL,
      REDIS_KEY_PREFIX: KEY_PREFIX,
      ADMIN_TOKEN: TOKEN,
      ...env,
    },
    url: `http://127.0.0.1:${port}/graphql`,
    readyUrl: `http://127.0.0.1:${port}/readyz`,
  });
}

async function startBaseline(): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name: "baseline (rate-limiter-flexible)",
    args: [...START_FLAGS, "--import", "tsx", "scripts/bench/baseline-server.ts"],
    env: { PORT: String(port), REDIS_URL, KEY_PREFIX: BASELINE_PREFIX },
    url: `http://127.0.0.1:${port}/check`,
    readyUrl: `http://127.0.0.1:${port}/readyz`,
  });
}

async function post(server: ServerProcess, body: string): Promise<unknown> {
  const response = await fetch(server.url, { method: "POST", headers: { "content-type": "application/json", ...AUTHORIZATION }, body });
  return response.json();
}

/** One request answered as expected, before anything is timed: a server that answers errors fast must not win. */
async function expectDecision(server: ServerProcess, body: string, allowed: boolean): Promise<void> {
  const answer = (await post(server, body)) as { allowed?: boolean; data?: { checkLimits?: { allowed: boolean } } };
  const got = answer.data?.checkLimits?.allowed ?? answer.allowed;
  if (got !== allowed) throw new Error(`${server.name} answered ${JSON.stringify(answer)}, expected allowed: ${allowed}`);
}

function requestOf(c: Caller): CheckRequest {
  return { tenantId: TENANT, userId: c.userId, ip: c.ip, apiKey: null, userAgent: null, cookie: null, resource: c.resource, method: c.method, cost: 1, dryRun: false, attributes: NO_ATTRIBUTES, ignorePathCase: false };
}

function header(): string {
  const cpu = cpus()[0]?.model ?? "unknown CPU";
  return [
    `bench: ${smoke ? "SMOKE (figures meaningless)" : "full"} run, ${ROUNDS} round(s) of ${SECONDS} s per scenario, median shown`,
    `machine: ${cpus().length} cores (${cpu}), load average ${loadavg().map((l) => l.toFixed(2)).join(" ")} at start, node ${process.version}`,
    `load generators: autocannon on loopback, in this process; for the client rows, one FloodgateClient process; the servers, Redis and they share the machine`,
    `CPU per decision (user + system): "CPU µs/decision" the server's, "Redis µs" redis-server's (all it did meanwhile, for anyone), "load gen µs" the load generator's (this process, or the client's)`,
  ].join("\n");
}

const COLUMNS = ["scenario", "server", "conns", "decisions/s", "p50 ms", "p99 ms", "p99.9 ms", "CPU µs/decision", "Redis µs", "load gen µs"];

function table(results: Map<Scenario, Measured>): string {
  const rows = [...results].map(([s, m]) => [
    s.name,
    s.server.name,
    String(s.connections),
    fmt(m.decisionsPerSecond, 0),
    fmt(m.p50, 2),
    fmt(m.p99, 2),
    fmt(m.p999, 2),
    fmt(m.cpuUsPerDecision, 1) + (m.failures > 0 ? ` (${m.failures} failed)` : ""),
    fmt(m.redisUsPerDecision, 1),
    fmt(m.generatorUsPerDecision, 1),
  ]);
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ")} |`;
  return ["", line(COLUMNS), `|${widths.map((w, i) => (i < 2 ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`, ...rows.map(line)].join("\n");
}

/** How the client decided in the measured rounds: its batches' size, and how much of the attack its refusal cache answered. */
function clientNote(runs: Map<ClientWorkload, ClientRunResult[]>): string {
  const batching = (workload: ClientWorkload) => batchingOf(runs.get(workload)!);
  const attack = runs.get("attack")!;
  const checks = attack.reduce((sum, r) => sum + r.load.requests + r.load.failures, 0);
  const cached = attack.reduce((sum, r) => sum + r.refusalCacheAnswers, 0);
  return [
    `\nclient, ${CLIENT_CALLERS} concurrent callers: ${batching("normal")}`,
    `client, ${CLIENT_CALLERS} callers, batch.parallel 1: ${batching("normal, one request a batch")}`,
    `client, attack on one key: ${fmt(checks === 0 ? NaN : (100 * cached) / checks, 2)}% of ${fmt(checks, 0)} checks answered by its refusal cache`,
  ].join("\n");
}

/** The requests the client sent in these runs and their mean number of checks. */
function batchingOf(measured: readonly ClientRunResult[]): string {
  const batches = measured.reduce((sum, r) => sum + r.batches, 0);
  const batched = measured.reduce((sum, r) => sum + r.batches * r.meanBatchSize, 0);
  return `${fmt(batches, 0)} requests to Floodgate, ${fmt(batches === 0 ? NaN : batched / batches, 1)} checks each on average`;
}

/**
 * The goals, each ratio taken round by round (two scenarios of one round run
 * a minute or two apart at most, where the medians of the whole run can fall
 * minutes apart on a host whose speed drifts): the median of the rounds'
 * ratios decides, and each round's is shown. Latencies compare the medians.
 */
function goals(rounds: Rounds, servers: Servers, ceiling: Scenario): string {
  const { floodgate, floodgateMany, floodgateOverrides, floodgateNoCache, floodgateNoUsage, baseline } = servers;
  const results = medians(rounds);
  const find = (name: string, server: ServerProcess, connections: number) =>
    [...rounds.keys()].find((s) => s.name.startsWith(name) && s.server === server && s.connections === connections)!;
  const fg32 = find("single", floodgate, 32);
  const base32 = find("single", baseline, 32);
  const fg1 = find("single", floodgate, 1);
  const batch = find("checkLimitsBatch", floodgate, BATCH_CONNECTIONS);
  const many = find("single", floodgateMany, 32);
  const overridden = find("single", floodgateOverrides, 32);
  const noUsage = find("single", floodgateNoUsage, 32);
  const attack = find("attack", floodgate, 32);
  const attackNoCache = find("attack", floodgateNoCache, 32);
  const client = find(`client, ${CLIENT_CALLERS} concurrent callers`, floodgate, CLIENT_CALLERS);
  const clientAttack = find("client, attack", floodgate, CLIENT_CALLERS);
  const grpc32 = find("gRPC ShouldRateLimit", floodgate, GRPC_STREAMS);
  const of = (scenario: Scenario) => results.get(scenario)!;
  const paired = (a: Scenario, b: Scenario) => pairedRatio(rounds, a, b);
  const verdict = (ok: boolean) => (ok ? "met" : "NOT met");
  const singles = paired(fg32, base32);
  const share = shareOfCeiling(rounds, batch, ceiling);
  const manyRules = paired(many, fg32);
  const overrides = paired(overridden, fg32);
  const usage = paired(fg32, noUsage);
  const attacked = paired(attack, fg32);
  const clients = paired(client, base32);
  const clientAttacked = paired(clientAttack, client);
  const rows = [
    [
      "single check, 32 conns: Floodgate >= 1.5x baseline decisions/s, p99 no worse",
      `${singles.text} decisions/s, p99 ${fmt(of(fg32).p99, 2)} vs ${fmt(of(base32).p99, 2)} ms`,
      verdict(singles.median >= 1.5 && of(fg32).p99 <= of(base32).p99),
    ],
    [`checkLimitsBatch of ${BATCH} >= 60% of the redis-benchmark ceiling`, share.text, verdict(share.median >= 0.6)],
    ["1 connection: p99 < 1 ms", `${fmt(of(fg1).p99, 3)} ms`, verdict(of(fg1).p99 < 1)],
    [`${MANY_RULES.toLocaleString("en")} rules: within 10% of ${FEW_RULES} rules`, manyRules.text, verdict(manyRules.median >= 0.9)],
    [`${MANY_OVERRIDES.toLocaleString("en")} overrides on one rule: within 10% of the plain check`, overrides.text, verdict(overrides.median >= 0.9)],
    [
      "usage counting on: within 5% of off (single check, 32 conns)",
      `${usage.text} decisions/s, CPU µs/decision ${fmt(of(fg32).cpuUsPerDecision, 1)} vs ${fmt(of(noUsage).cpuUsPerDecision, 1)}`,
      verdict(usage.median >= 0.95),
    ],
    [
      "attack on one key over its limit: >= 5x normal single checks",
      `${attacked.text} (cache off: ${paired(attackNoCache, fg32).text})`,
      verdict(attacked.median >= 5),
    ],
    [
      `client, ${CLIENT_CALLERS} concurrent callers >= 1.5x baseline decisions/s at 32 conns, p99 no worse`,
      `${clients.text} decisions/s, p99 ${fmt(of(client).p99, 2)} vs ${fmt(of(base32).p99, 2)} ms`,
      verdict(clients.median >= 1.5 && of(client).p99 <= of(base32).p99),
    ],
    [
      `gRPC ShouldRateLimit, ${GRPC_STREAMS} streams, beside the GraphQL single check at 32 conns and the baseline`,
      `${paired(grpc32, fg32).text} of GraphQL, ${paired(grpc32, base32).text} of baseline decisions/s, p99 ${fmt(of(grpc32).p99, 2)} vs ${fmt(of(fg32).p99, 2)} ms`,
      "(measured)",
    ],
    ["client, attack on one key >= 20x the client's normal checks/s", clientAttacked.text, verdict(clientAttacked.median >= 20)],
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  return [
    "\ngoals (ratios from the same run, taken round by round: their median, and each round's in brackets):",
    ...rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join("  ")}`),
  ].join("\n");
}

/**
 * The hot bucket (scripts/bench/hot-bucket.ts): two instances with leased
 * budgets off, then two with them on, each pair taking the same open-loop
 * traffic on one bucket, on a database of their own.
 */
async function hotBucketRuns(cleanups: (() => Promise<unknown>)[]): Promise<HotBucketRun[]> {
  const { url } = await seededDatabase("bench_hot", [hotBucketRule(HOT_BUCKET_RUN.limit, HOT_BUCKET_RUN.windowMs)], cleanups);
  const runs: HotBucketRun[] = [];
  for (const [label, env] of [
    ["leases off", { REDIS_TIMEOUT_MS: "1000" }],
    ["leases on", { REDIS_TIMEOUT_MS: "1000", LEASE_HOT_CHECKS_PER_SECOND: "500", LEASE_MS: "100" }],
  ] as const) {
    const instances = await Promise.all([1, 2].map((n) => startFloodgate(`floodgate ${n}, ${label}`, url, env)));
    try {
      await driveHotBucket({ label, urls: instances.map((i) => i.url), token: TOKEN, tenantId: HOT_BUCKET.tenantId, ...HOT_BUCKET_RUN, seconds: Math.min(2, SECONDS) });
      runs.push(await driveHotBucket({ label, urls: instances.map((i) => i.url), token: TOKEN, tenantId: HOT_BUCKET.tenantId, ...HOT_BUCKET_RUN }));
    } finally {
      await Promise.all(instances.map((i) => i.stop()));
    }
  }
  return runs;
}

/** 5,000 checks a second on one bucket, 3 windows of 5 s over their limit of 15,000 (smoke: 2,000 a second, windows of 1 s). */
const HOT_BUCKET_RUN = smoke
  ? { ratePerSecond: 2000, seconds: 3.5, limit: 1200, windowMs: 1000 }
  : { ratePerSecond: 5000, seconds: 21, limit: 15_000, windowMs: 5000 };

function hotBucketTable(runs: readonly HotBucketRun[]): string {
  const [off, on] = runs as [HotBucketRun, HotBucketRun];
  const { ratePerSecond, limit, windowMs } = HOT_BUCKET_RUN;
  const row = (r: HotBucketRun) =>
    `  ${r.label.padEnd(11)} ${fmt(r.checks, 0).padStart(8)} checks  ${fmt(r.redisCallsPerCheck, 4).padStart(7)} Redis calls/check  windows admitted ${r.windows.map((w) => fmt(w, 0)).join(", ")}  over-admission ${r.overAdmission}  under-admission ${r.underAdmission}  degraded ${r.degraded}  failed ${r.refusedOrFailed.failed}`;
  const fewer = off.redisCallsPerCheck / on.redisCallsPerCheck;
  return [
    `\nhot bucket: ${fmt(ratePerSecond, 0)} checks/s on one bucket (FIXED_WINDOW, ${fmt(limit, 0)} per ${windowMs / 1000} s), over two instances, complete windows only:`,
    row(off),
    row(on),
    `  leases: ${fmt(fewer, 1)}x fewer Redis calls per check (goal >= 10x: ${fewer >= 10 ? "met" : "NOT met"}), over-admission ${on.overAdmission} (goal 0: ${on.overAdmission === 0 ? "met" : "NOT met"})`,
  ].join("\n");
}

function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : "-";
}

await main();
