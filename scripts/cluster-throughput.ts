/**
 * Decisions per second on one Redis, a Redis Cluster of 1 master and one of 3
 * masters, side by side: `npm run cluster:throughput`. Drives the counter
 * store itself (no HTTP) from this process with concurrent callers, in rounds
 * that alternate the setups, and prints the median of each with the CPU the
 * client process and the redis-servers used. Then compares ways of sending a
 * check's per-slot commands on 3 masters: one command each (what the store
 * does), one explicit pipeline per node, and ioredis auto-pipelining.
 *
 *   --seconds N   length of each measurement (default 3)
 *   --rounds N    rounds per setup (default 3)
 *   --callers N   concurrent callers (default 64)
 */

import { Cluster, type Redis } from "ioredis";
import calculateSlot from "cluster-key-slot";
import type { CounterCall, CounterStore } from "../src/domain/ports.js";
import type { LimitParams } from "../src/domain/algorithms/index.js";
import { createRedisClient } from "../src/store/redis/client.js";
import { KeyLayout } from "../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../src/store/redis/redis-counter-store.js";
import { MODE } from "../src/store/redis/script-codes.js";
import { decideArgs, decideInPipeline, floodgateLibrary, loadLibrary, registerScripts, type ScriptArgs } from "../src/store/redis/scripts.js";
import { startRedisCluster, type LocalRedisCluster } from "../test/harness/local-redis.js";
import { startOwnRedis, type OwnRedis } from "../test/harness/redis-server.js";
import { numberOption } from "../test/harness/number-option.js";

const SECONDS = numberOption("seconds", 3);
const ROUNDS = numberOption("rounds", 3);
const CALLERS = numberOption("callers", 64);
const TIMEOUT_MS = 10_000;

const roomy: LimitParams = { algorithm: "FIXED_WINDOW", limit: 1_000_000_000, windowMs: 3_600_000, capacity: 1_000_000_000, action: "REJECT" };
const tight: LimitParams = { ...roomy, limit: 1, capacity: 1 };

/** The checks measured: each makes the call for the n-th request. */
const WORKLOADS: Record<string, (n: number) => CounterCall> = {
  "1 rule": (n) => ({ buckets: [{ ruleId: "r1", key: `user:u${n % 10_000}`, params: roomy }], cost: 1, dryRun: false }),
  "3 rules": (n) => ({
    buckets: ["r1", "r2", "r3"].map((ruleId) => ({ ruleId, key: `user:u${n % 10_000}`, params: roomy })),
    cost: 1,
    dryRun: false,
  }),
  // The third rule allows one request per user: nearly every check is reserved in three slots and released in two.
  "3 rules, denied": (n) => ({
    buckets: [
      { ruleId: "r1", key: `user:u${n % 10_000}`, params: roomy },
      { ruleId: "r2", key: `user:u${n % 10_000}`, params: roomy },
      { ruleId: "r3", key: `user:u${n % 10_000}`, params: tight },
    ],
    cost: 1,
    dryRun: false,
  }),
};

interface Setup {
  name: string;
  store: CounterStore;
  /** The Redis servers behind it, to ask for the CPU they used. */
  servers: (Redis | Cluster)[];
}

interface Measured {
  perSecond: number;
  clientCpu: number;
  redisCpu: number;
}

/** CPU time the servers have used so far, in ms: INFO cpu, user and system, of each. */
async function cpuMs(servers: readonly (Redis | Cluster)[]): Promise<number> {
  const used = await Promise.all(
    servers.map(async (server) => {
      const info = await server.info("cpu");
      return ["used_cpu_user", "used_cpu_sys"].reduce((sum, field) => sum + Number(new RegExp(`^${field}:([\\d.]+)`, "m").exec(info)![1]) * 1000, 0);
    }),
  );
  return used.reduce((a, b) => a + b, 0);
}

async function measure(run: (n: number) => Promise<unknown>, servers: readonly (Redis | Cluster)[]): Promise<Measured> {
  let n = 0;
  const cpuBefore = process.cpuUsage();
  const redisBefore = await cpuMs(servers);
  const started = performance.now();
  const end = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (performance.now() < end) await run(n++);
    }),
  );
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return { perSecond: (n / elapsed) * 1000, clientCpu: (cpu.user + cpu.system) / 1000 / elapsed, redisCpu: ((await cpuMs(servers)) - redisBefore) / elapsed };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const percent = (share: number) => `${Math.round(share * 100)}%`.padStart(5);

async function main(): Promise<void> {
  const single: OwnRedis = await startOwnRedis();
  const clusters: LocalRedisCluster[] = [];
  const closers: (() => Promise<void>)[] = [];
  try {
    const setups: Setup[] = [];
    const singleClient = createRedisClient({ kind: "single", url: single.url }, TIMEOUT_MS);
    await singleClient.connect();
    const singleStore = new RedisCounterStore(singleClient, { layout: new KeyLayout("fgbench:", 16384) });
    closers.push(() => singleStore.close());
    setups.push({ name: "one Redis", store: singleStore, servers: [singleClient] });
    for (const masters of [1, 3]) {
      const cluster = await startRedisCluster({ masters, replicasPerMaster: 0 });
      clusters.push(cluster);
      const client = createRedisClient({ kind: "cluster", nodes: cluster.nodes }, TIMEOUT_MS);
      await client.connect();
      const store = new RedisCounterStore(client, { layout: new KeyLayout("fgbench:", 16384) });
      closers.push(() => store.close());
      setups.push({ name: `cluster, ${masters} master${masters > 1 ? "s" : ""}`, store, servers: client.nodes("master") });
    }

    console.log(`cluster throughput: ${CALLERS} concurrent callers, ${SECONDS} s per measurement, median of ${ROUNDS} rounds; CPU as a share of one core`);
    console.log("workload          setup                decisions/s   client CPU   redis CPU");
    for (const [workload, callFor] of Object.entries(WORKLOADS)) {
      const results = new Map<string, Measured[]>(setups.map((s) => [s.name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? setups : [...setups].reverse();
        for (const setup of order) results.get(setup.name)!.push(await measure((n) => setup.store.decide([callFor(n)]), setup.servers));
      }
      for (const setup of setups) {
        const runs = results.get(setup.name)!;
        console.log(
          `${workload.padEnd(17)} ${setup.name.padEnd(20)} ${String(Math.round(median(runs.map((r) => r.perSecond)))).padStart(11)}   ${percent(median(runs.map((r) => r.clientCpu))).padStart(10)}   ${percent(median(runs.map((r) => r.redisCpu))).padStart(9)}`,
        );
      }
    }
    await compareSending(clusters[1]!);
  } finally {
    // Servers are stopped whatever the clients do on the way out.
    await Promise.allSettled(closers.map((close) => close()));
    for (const cluster of clusters) await cluster.stop();
    await single.stop();
  }
}

/** A 3-rule check's three reserves on 3 masters, sent three ways. */
async function compareSending(cluster: LocalRedisCluster): Promise<void> {
  const library = floodgateLibrary();
  const plain = new Cluster(cluster.nodes, { lazyConnect: true });
  const direct = registerScripts(plain, library);
  const autoPipelined = new Cluster(cluster.nodes, { enableAutoPipelining: true, lazyConnect: true });
  await plain.connect();
  await autoPipelined.connect();
  for (const node of plain.nodes("master")) await loadLibrary(node, library);
  const layout = new KeyLayout("fgsend:", 16384);
  const reserves = (n: number): ScriptArgs[] => {
    const call = WORKLOADS["3 rules"]!(n);
    return call.buckets.map((_, i) => decideArgs(layout, call, [i], MODE.RESERVE, null));
  };
  const nodeOf = (args: ScriptArgs) => plain.slots[calculateSlot(String(args[1]))]!.join(",");
  const ways: Record<string, (n: number) => Promise<unknown>> = {
    "one command each": (n) => Promise.all(reserves(n).map((args) => direct.floodgateDecide(...args))),
    "a pipeline per node": (n) => {
      const byNode = new Map<string, ScriptArgs[]>();
      for (const args of reserves(n)) byNode.set(nodeOf(args), [...(byNode.get(nodeOf(args)) ?? []), args]);
      return Promise.all(
        [...byNode.values()].map((commands) => {
          const pipeline = direct.pipeline();
          const answers = commands.map((args) => decideInPipeline(direct, pipeline, args));
          return pipeline.exec().then((results) => Promise.all(answers.map((answer, i) => answer(results![i]!))));
        }),
      );
    },
    "auto-pipelined FCALL": (n) => Promise.all(reserves(n).map((args) => (autoPipelined as unknown as Redis).fcall(library.decide, ...(args as [number, ...(string | number)[]])))),
  };
  const results = new Map<string, number[]>(Object.keys(ways).map((w) => [w, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [way, run] of Object.entries(ways)) results.get(way)!.push((await measure(run, [])).perSecond);
  }
  console.log("\nsending a 3-rule check's reserves on 3 masters:");
  for (const [way, perSecond] of results) console.log(`${way.padEnd(24)} ${String(Math.round(median(perSecond))).padStart(7)} checks/s`);
  plain.disconnect();
  autoPipelined.disconnect();
}

await main();
