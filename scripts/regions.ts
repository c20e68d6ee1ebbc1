/**
 * Two regions sharing a GLOBAL limit, measured: `npm run regions` (a few
 * minutes). For each sync interval (--sync, default 100,500,1000 ms) it starts
 * two regions on this machine (test/harness/regions.ts: a redis-server and
 * two instances each, one Postgres, a TCP proxy between the regions) and
 *   steady     sends --rate checks a second (default 800), open loop, half to
 *              each region, on one bucket of a GLOBAL fixed window of --limit
 *              (default 2,000) per 10 s, for --seconds (default 25), and counts
 *              what each complete window admitted: the overshoot beside its
 *              bound, (regions - 1) x a region's admitted rate x the sync interval
 *   partition  cuts the link, sends the same traffic to a fresh bucket for two
 *              windows (REGION_PARTITION_MODE, --mode, default SHARE), counts
 *              what each region admitted in each complete window, heals the
 *              link and times how long until both regions agree on the
 *              bucket's counts (the converge time), beside what the window's
 *              admissions say they should agree on: every unit, once
 * Each instance is a process of its own (run `npm run build` first; the npm
 * script does). A check's window is the one its decidedAt falls in (Redis's clock: both
 * regions' Redis run on this machine's).
 */

import { startRegions } from "../test/harness/regions.js";
import { freePort } from "../test/harness/free-port.js";
import { startServer, type ServerProcess } from "./bench/processes.js";
import { createScratchDatabase } from "../test/harness/scratch-database.js";
import { GraphQLClient } from "../test/harness/graphql-client.js";
import { numberOption } from "../test/harness/number-option.js";

const SYNCS = (process.argv.includes("--sync") ? process.argv[process.argv.indexOf("--sync") + 1]! : "100,500,1000").split(",").map(Number);
const RATE = numberOption("rate", 800);
const LIMIT = numberOption("limit", 2000);
const SECONDS = numberOption("seconds", 25);
const MODE = process.argv.includes("--mode") ? process.argv[process.argv.indexOf("--mode") + 1]! : "SHARE";
const WINDOW_MS = 10_000;
const TICK_MS = 10;

interface Decision {
  region: number;
  allowed: boolean;
  degraded: boolean;
  atMs: number;
}

const CHECK = "query($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed degraded decidedAt remaining } }";

async function main(): Promise<void> {
  const database = await createScratchDatabase("regions");
  const rows: string[] = [];
  try {
    for (const syncMs of SYNCS) rows.push(...(await measure(database.url, syncMs)));
  } finally {
    await database.drop();
  }
  console.log(`\nregions: 2 regions x 2 instances, ${RATE} checks/s on one bucket (GLOBAL FIXED_WINDOW, ${LIMIT} per ${WINDOW_MS / 1000} s), partition mode ${MODE}`);
  for (const row of rows) console.log(row);
}

async function measure(databaseUrl: string, syncMs: number): Promise<string[]> {
  const regions = await startRegions({
    names: ["eu", "us"],
    instancesPerRegion: 2,
    databaseUrl,
    startInstance,
    env: {
      REGION_SYNC_MS: String(syncMs),
      REGION_PARTITION_AFTER_MS: String(Math.max(1000, 5 * syncMs)),
      REGION_PARTITION_MODE: MODE,
      RULE_RELOAD_MS: "1000",
      LOG_LEVEL: "warn",
      // Redis's decisions are what is measured: a check past a short deadline would be decided by failure mode instead.
      REDIS_TIMEOUT_MS: "1000",
    },
  });
  try {
    const clients = regions.regions.map((region) => region.instances.map((instance) => new GraphQLClient(instance.url, regions.adminToken)));
    const steady = await ready(clients, `steady-${syncMs}-${Date.now()}`);
    const decisions = await drive(clients, steady, SECONDS * 1000);
    const windows = completeWindows(decisions);
    const perRegionRate = admittingRate(decisions);
    const overshoot = Math.max(0, ...windows.map((w) => w.admitted - LIMIT));
    const bound = perRegionRate * (syncMs / 1000);
    const rows = [
      `  sync ${String(syncMs).padStart(4)} ms, steady:    windows admitted ${windows.map((w) => w.admitted).join(", ")} (limit ${LIMIT}); overshoot ${overshoot}, bound ${bound.toFixed(0)} (a region admitted ${perRegionRate.toFixed(0)}/s); degraded ${decisions.filter((d) => d.degraded).length}`,
    ];

    const cut = `partition-${syncMs}-${Date.now()}`;
    await ready(clients, cut);
    await regions.cut();
    await until(async () => (await Promise.all(clients.map((c) => dryRun(c[0]!, cut)))).every((d) => d.degraded));
    const during = await drive(clients, cut, 2 * WINDOW_MS + 1000);
    await regions.heal();
    const healedAt = performance.now();
    const cutWindows = completeWindows(during).map(({ window }) => {
      const admitted = [0, 1].map((r) => during.filter((d) => d.region === r && d.allowed && Math.floor(d.atMs / WINDOW_MS) === window).length);
      return `${admitted[0]} + ${admitted[1]} = ${admitted[0]! + admitted[1]!}`;
    });
    // Converged: both regions say the same of the bucket, linked again. What they agree on is every unit of the window admitted, once.
    let agreed: number | null = null;
    await until(async () => {
      const views = await Promise.all(clients.map((c) => dryRun(c[0]!, cut)));
      agreed = views[0]!.remaining;
      return views.every((v) => !v.degraded && v.remaining === agreed);
    });
    const convergedMs = performance.now() - healedAt;
    const lastWindow = Math.floor(Date.now() / WINDOW_MS);
    const admittedNow = during.filter((d) => d.allowed && Math.floor(d.atMs / WINDOW_MS) === lastWindow).length;
    rows.push(
      `  sync ${String(syncMs).padStart(4)} ms, partition: complete windows admitted eu + us ${cutWindows.join(", ")} (limit ${LIMIT}); converged ${convergedMs.toFixed(0)} ms after the link came back, both leaving ${agreed} for the ${admittedNow} admitted in the window (${Math.max(0, LIMIT - admittedNow - 1)} expected)`,
    );
    return rows;
  } finally {
    await regions.stop();
  }
}

/** An instance as a process of its own (the built dist/main.js), as in service. */
async function startInstance(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name: `floodgate ${env.REGION}`,
    args: ["dist/main.js"],
    env: { NODE_ENV: "production", PORT: String(port), HOST: "127.0.0.1", DATA_DIR: "memory://", ...env },
    url: `http://127.0.0.1:${port}/graphql`,
    readyUrl: `http://127.0.0.1:${port}/readyz`,
  });
}

/** A tenant with the GLOBAL rule, once every instance knows the rule and the regions are linked; its id. */
async function ready(clients: GraphQLClient[][], tenantId: string): Promise<string> {
  const mutation = `mutation { createRule(input: { tenantId: "${tenantId}", name: "global", scope: [TENANT], algorithm: FIXED_WINDOW, limit: ${LIMIT}, window: ${WINDOW_MS / 1000}, reach: GLOBAL }) { id } }`;
  const created = await clients[0]![0]!.raw<{ createRule: { id: string } }>({ query: mutation });
  if (!created.data) throw new Error(`createRule failed: ${JSON.stringify(created.errors)}`);
  for (const client of clients.flat()) await until(async () => (await dryRun(client, tenantId)).ruleKnown && !(await dryRun(client, tenantId)).degraded);
  return tenantId;
}

async function dryRun(client: GraphQLClient, tenantId: string): Promise<{ ruleKnown: boolean; degraded: boolean; remaining: number | null }> {
  const { data } = await client.raw<{ checkLimits: { degraded: boolean; remaining: number | null } }>({ query: CHECK, variables: { r: { tenantId, dryRun: true } } });
  const decision = data!.checkLimits;
  return { ruleKnown: decision.remaining !== null, degraded: decision.degraded, remaining: decision.remaining };
}

/** Open loop: RATE checks a second, half to each region, spread over its instances. */
async function drive(clients: GraphQLClient[][], tenantId: string, ms: number): Promise<Decision[]> {
  const decisions: Decision[] = [];
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  let sent = 0;
  while (performance.now() - started < ms) {
    const due = Math.floor(((performance.now() - started) / 1000) * RATE);
    for (; sent < due; sent++) {
      const region = sent % 2;
      const client = clients[region]![Math.floor(sent / 2) % clients[region]!.length]!;
      const request = client
        .raw<{ checkLimits: { allowed: boolean; degraded: boolean; decidedAt: string } }>({ query: CHECK, variables: { r: { tenantId } } })
        .then(({ data }) => {
          const d = data?.checkLimits;
          if (d) decisions.push({ region, allowed: d.allowed, degraded: d.degraded, atMs: Date.parse(d.decidedAt) });
        })
        .finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await new Promise((resolve) => setTimeout(resolve, TICK_MS));
  }
  await Promise.all([...inFlight]);
  return decisions;
}

/** The windows the run covered whole (not its first and last), with what each admitted. */
function completeWindows(decisions: readonly Decision[]): { window: number; admitted: number }[] {
  const byWindow = new Map<number, number>();
  for (const d of decisions) {
    const w = Math.floor(d.atMs / WINDOW_MS);
    byWindow.set(w, (byWindow.get(w) ?? 0) + (d.allowed ? 1 : 0));
  }
  const windows = [...byWindow.keys()].sort((a, b) => a - b).slice(1, -1);
  return windows.map((window) => ({ window, admitted: byWindow.get(window)! }));
}

/** One region's admitted checks per second while its windows were still admitting (the rate that bounds the overshoot). */
function admittingRate(decisions: readonly Decision[]): number {
  const admitted = decisions.filter((d) => d.allowed && d.region === 0);
  if (admitted.length < 2) return 0;
  // Within each window, admissions run from its start until the limit is reached.
  const spans = new Map<number, { first: number; last: number; count: number }>();
  for (const d of admitted) {
    const w = Math.floor(d.atMs / WINDOW_MS);
    const span = spans.get(w) ?? { first: d.atMs, last: d.atMs, count: 0 };
    spans.set(w, { first: Math.min(span.first, d.atMs), last: Math.max(span.last, d.atMs), count: span.count + 1 });
  }
  const rates = [...spans.values()].filter((s) => s.last > s.first).map((s) => (s.count * 1000) / (s.last - s.first));
  return Math.max(...rates);
}

async function until(probe: () => Promise<boolean>, boundMs = 20_000): Promise<void> {
  const started = performance.now();
  while (!(await probe())) {
    if (performance.now() - started > boundMs) throw new Error(`not within ${boundMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

await main();
