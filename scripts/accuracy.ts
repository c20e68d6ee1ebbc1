/**
 * The accuracy harness: `npm run accuracy` (or `npm run accuracy -- --short`,
 * the CI smoke). It starts Floodgate in this process on real Redis and a
 * Postgres database of its own, then drives it over HTTP and judges every
 * decision against the exact definition, using the time the store decided it
 * (LimitDecision.decidedAt, Redis TIME):
 *
 *   contention  64 callers in closed loops on 2 users per algorithm, limit 5
 *               per second (2 in the short run, so that a loaded machine's
 *               slower callers still go many times over it): atomicity under
 *               concurrency is what decides. A run that refuses less than half
 *               of these checks did not contend and fails.
 *   poisson     open-loop Poisson arrivals on many users, each at a rate
 *               between 0.5 and 1.5 times its limit: every decision is a
 *               borderline one, the sliding window counter's hardest case.
 *   light       the same at 0.05 to 0.5 times the limit: traffic mostly
 *               under its limit, as most of a real fleet's is.
 *
 * Open loop means each arrival is sent at its scheduled time whether or not
 * earlier ones were answered; how late the harness sent them is printed, and
 * a full run whose p99 lateness exceeds MAX_P99_LATENESS_MS fails, since the
 * traffic it judged was not the traffic it claims.
 *
 * Settings: REDIS_URL and DATABASE_URL (defaults: this machine's services).
 * It exits 1 when a goal is missed.
 */

import "reflect-metadata";
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { startApp } from "../src/app.js";
import { loadSettings } from "../src/config/settings.js";
import type { Algorithm } from "../src/domain/rule.js";
/** The algorithms limiting a rate; CONCURRENCY limits requests in flight, which no rate measures. */
type RateAlgorithm = Exclude<Algorithm, "CONCURRENCY">;
import { createScratchDatabase } from "../test/harness/scratch-database.js";
import { judgeFixedWindow, judgeTokenBucket, judgeTrailingWindow, sum, type Judged, type Observed, type Rule } from "./accuracy/truth.js";

const short = process.argv.includes("--short");
const CALLERS = 64;
/** Open-loop arrivals waiting for an answer at most; beyond it the schedule slips, and the lateness shows it. */
const MAX_IN_FLIGHT = 256;
const MAX_P99_LATENESS_MS = 50;
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
/** Cloudflare's published share of wrong decisions for its sliding window counter. */
const CLOUDFLARE_ERROR_SHARE = 0.00003;

const ALGORITHMS: RateAlgorithm[] = ["SLIDING_WINDOW_LOG", "FIXED_WINDOW", "TOKEN_BUCKET", "LEAKY_BUCKET", "SLIDING_WINDOW_COUNTER"];
const EXACT: Algorithm[] = ["SLIDING_WINDOW_LOG", "FIXED_WINDOW", "TOKEN_BUCKET", "LEAKY_BUCKET"];

interface ClosedLoopPhase {
  kind: "closed";
  name: string;
  rule: Rule;
  seconds: number;
  usersPerAlgorithm: number;
}

interface OpenLoopPhase {
  kind: "open";
  name: string;
  rule: Rule;
  seconds: number;
  /** Each user's rate, as a multiple of its limit, is drawn uniformly from this range. */
  rateRange: [number, number];
  /** Users per algorithm: the sliding window counter gets most, its error share is the goal. */
  users: Record<RateAlgorithm, number>;
}

type Phase = ClosedLoopPhase | OpenLoopPhase;

const POISSON_RULE: Rule = { limit: 10, windowMs: 2_000, capacity: 10 };
const OPEN_LOOP_USERS: Record<RateAlgorithm, number> = short
  ? { SLIDING_WINDOW_COUNTER: 120, SLIDING_WINDOW_LOG: 20, FIXED_WINDOW: 20, TOKEN_BUCKET: 20, LEAKY_BUCKET: 20 }
  : { SLIDING_WINDOW_COUNTER: 160, SLIDING_WINDOW_LOG: 20, FIXED_WINDOW: 20, TOKEN_BUCKET: 20, LEAKY_BUCKET: 20 };
const CONTENTION: ClosedLoopPhase = {
  kind: "closed",
  name: "contention",
  rule: short ? { limit: 2, windowMs: 1_000, capacity: 2 } : { limit: 5, windowMs: 1_000, capacity: 5 },
  seconds: short ? 4 : 20,
  usersPerAlgorithm: 2,
};
const POISSON: OpenLoopPhase = { kind: "open", name: "poisson", rule: POISSON_RULE, seconds: short ? 8 : 120, rateRange: [0.5, 1.5], users: OPEN_LOOP_USERS };
const LIGHT: OpenLoopPhase = { kind: "open", name: "light", rule: POISSON_RULE, seconds: short ? 6 : 60, rateRange: [0.05, 0.5], users: OPEN_LOOP_USERS };
const PHASES: Phase[] = [CONTENTION, POISSON, LIGHT];

const TOKEN = `accuracy-${randomUUID()}`;
const CHECK = `query Check($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed degraded decidedAt } }`;
const CREATE = `mutation Create($i: CreateRuleInput!) { createRule(input: $i) { id } }`;

interface Target {
  algorithm: Algorithm;
  user: string;
}

interface Sample extends Observed, Target {
  /** Completion order, to order decisions made in the same millisecond. */
  seq: number;
}

interface PhaseResult {
  phase: Phase;
  judged: Map<Algorithm, Judged>;
}

async function main(): Promise<void> {
  const database = await createScratchDatabase("accuracy");
  const prefix = `fgacc:${randomUUID().slice(0, 8)}:`;
  const app = await startApp(
    loadSettings({
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: database.url,
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      ADMIN_TOKEN: TOKEN,
      // The algorithms are under test, not failover: no check may fall back to its failure mode on a busy machine.
      REDIS_TIMEOUT_MS: "5000",
      // No rule snapshot: the scratch database's rules have no business in the checkout's DATA_DIR.
      DATA_DIR: "memory://",
      LOG_LEVEL: "warn",
    }),
    { logger: pino({ level: "warn" }) },
  );
  try {
    console.log(`accuracy: ${short ? "short" : "full"} run against ${app.url} (counters: ${app.storage.counters})`);
    const client = new Client(app.url);
    const results: PhaseResult[] = [];
    for (const phase of PHASES) {
      const samples = await runPhase(client, phase);
      results.push({ phase, judged: new Map(ALGORITHMS.map((a) => [a, judge(a, samples, phase.rule)])) });
    }
    process.exitCode = report(results) ? 0 : 1;
  } finally {
    await app.close();
    await database.drop();
  }
}

async function runPhase(client: Client, phase: Phase): Promise<Sample[]> {
  const { limit, windowMs, capacity } = phase.rule;
  const tenant = (algorithm: Algorithm) => `${phase.name}-${algorithm}`;
  for (const algorithm of ALGORITHMS) {
    const burst = algorithm === "TOKEN_BUCKET" || algorithm === "LEAKY_BUCKET" ? capacity : null;
    await client.request(CREATE, {
      i: { tenantId: tenant(algorithm), name: "per-user", scope: ["USER"], algorithm, limit, window: windowMs / 1000, burst },
    });
  }
  const samples: Sample[] = [];
  let seq = 0;
  const check = async ({ algorithm, user }: Target) => {
    const data = (await client.request(CHECK, { r: { tenantId: tenant(algorithm), userId: user } })) as {
      checkLimits: { allowed: boolean; degraded: boolean; decidedAt: string };
    };
    if (data.checkLimits.degraded) throw new Error("a check was decided without Redis: the run measures nothing");
    samples.push({ algorithm, user, allowed: data.checkLimits.allowed, atMs: Date.parse(data.checkLimits.decidedAt), seq: seq++ });
  };
  const started = performance.now();
  let lateness = "";
  if (phase.kind === "closed") {
    await contend(phase, check);
  } else {
    const sources = ALGORITHMS.flatMap((algorithm) => users(algorithm, phase.users[algorithm], phase.rateRange));
    const late = await sendOnSchedule(poissonArrivals(phase.seconds * 1000, windowMs / limit, sources), check);
    lateness = `, sent late by p50 ${percentile(late, 0.5).toFixed(1)} ms, p99 ${percentile(late, 0.99).toFixed(1)} ms`;
    if (!short && percentile(late, 0.99) > MAX_P99_LATENESS_MS) {
      throw new Error(`${phase.name}: p99 lateness over ${MAX_P99_LATENESS_MS} ms: the harness could not send the schedule it judges (machine too busy)`);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`accuracy: ${phase.name}: ${samples.length} decisions in ${seconds.toFixed(1)} s (${Math.round(samples.length / seconds)} per second)${lateness}`);
  return samples;
}

/** CALLERS closed loops, each checking a random user of a random algorithm until the phase ends. */
async function contend(phase: ClosedLoopPhase, check: (target: Target) => Promise<void>): Promise<void> {
  const deadline = performance.now() + phase.seconds * 1000;
  const caller = async () => {
    while (performance.now() < deadline) {
      const algorithm = ALGORITHMS[Math.floor(Math.random() * ALGORITHMS.length)]!;
      await check({ algorithm, user: `u${Math.floor(Math.random() * phase.usersPerAlgorithm)}` });
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
}

/**
 * Sends each arrival at its time, without waiting for earlier answers (up to
 * MAX_IN_FLIGHT outstanding), and returns how late each was sent, in ms.
 */
async function sendOnSchedule(arrivals: readonly (Target & { atMs: number })[], send: (target: Target) => Promise<void>): Promise<number[]> {
  const started = performance.now();
  const lateness: number[] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: unknown = null;
  for (const arrival of arrivals) {
    if (failure !== null) break;
    const wait = started + arrival.atMs - performance.now();
    if (wait >= 1) await sleep(wait);
    while (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
    lateness.push(Math.max(0, performance.now() - started - arrival.atMs));
    const sent: Promise<void> = send(arrival)
      .catch((error: unknown) => {
        failure ??= error;
      })
      .finally(() => inFlight.delete(sent));
    inFlight.add(sent);
  }
  await Promise.all(inFlight);
  if (failure !== null) throw failure;
  return lateness;
}

function users(algorithm: Algorithm, count: number, [lowest, highest]: [number, number]): (Target & { rate: number })[] {
  return Array.from({ length: count }, (_, i) => ({ algorithm, user: `p${i}`, rate: lowest + Math.random() * (highest - lowest) }));
}

/** Arrival times (ms from the start) of independent Poisson processes, merged; `meanGapMs` is the gap at exactly the limit. */
function poissonArrivals(durationMs: number, meanGapMs: number, sources: readonly (Target & { rate: number })[]): (Target & { atMs: number })[] {
  const arrivals: (Target & { atMs: number })[] = [];
  for (const source of sources) {
    let at = 0;
    for (;;) {
      at += (-Math.log(1 - Math.random()) * meanGapMs) / source.rate;
      if (at >= durationMs) break;
      arrivals.push({ atMs: at, algorithm: source.algorithm, user: source.user });
    }
  }
  return arrivals.sort((a, b) => a.atMs - b.atMs);
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

function judge(algorithm: Algorithm, samples: readonly Sample[], rule: Rule): Judged {
  const byUser = new Map<string, Sample[]>();
  for (const s of samples) {
    if (s.algorithm !== algorithm) continue;
    const list = byUser.get(s.user) ?? [];
    list.push(s);
    byUser.set(s.user, list);
  }
  const judgeOne =
    algorithm === "FIXED_WINDOW" ? judgeFixedWindow : algorithm === "TOKEN_BUCKET" || algorithm === "LEAKY_BUCKET" ? judgeTokenBucket : judgeTrailingWindow;
  return sum([...byUser.values()].map((list) => judgeOne(list.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq), rule)));
}

function wrongShare(j: Judged): number {
  return (j.wronglyAdmitted + j.wronglyDenied) / Math.max(1, j.decisions);
}

function report(results: readonly PhaseResult[]): boolean {
  const rows: string[][] = [["algorithm", "phase", "decisions", "admitted", "over-admission (worst window)", "wrongly admitted", "wrongly denied", "wrong decisions"]];
  for (const algorithm of ALGORITHMS) {
    for (const { phase, judged } of results) {
      const j = judged.get(algorithm)!;
      rows.push([
        algorithm,
        phase.name,
        String(j.decisions),
        String(j.admitted),
        String(j.worstOverAdmission),
        String(j.wronglyAdmitted),
        String(j.wronglyDenied),
        `${(wrongShare(j) * 100).toFixed(4)}%`,
      ]);
    }
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const row of rows) console.log(row.map((cell, c) => cell.padEnd(widths[c]!)).join("  "));

  const contention = results.find((r) => r.phase === CONTENTION)!.judged;
  for (const algorithm of ALGORITHMS) {
    const j = contention.get(algorithm)!;
    if (j.admitted * 2 > j.decisions) {
      throw new Error(`contention: ${algorithm} refused only ${j.decisions - j.admitted} of ${j.decisions} checks; the callers did not contend and the run proves nothing`);
    }
  }
  let ok = true;
  for (const algorithm of EXACT) {
    const worst = Math.max(...results.map((r) => r.judged.get(algorithm)!.worstOverAdmission));
    if (worst > 0) {
      console.log(`accuracy: GOAL MISSED: ${algorithm} admitted ${worst} beyond its definition in one window`);
      ok = false;
    }
  }
  const poisson = results.find((r) => r.phase === POISSON)!.judged.get("SLIDING_WINDOW_COUNTER")!;
  if (!short && wrongShare(poisson) >= CLOUDFLARE_ERROR_SHARE) {
    console.log(
      `accuracy: GOAL MISSED: sliding window counter wrong on ${(wrongShare(poisson) * 100).toFixed(4)}% of Poisson decisions around the limit ` +
        `(Cloudflare's published figure: ${(CLOUDFLARE_ERROR_SHARE * 100).toFixed(4)}%)`,
    );
    ok = false;
  }
  console.log(ok ? "accuracy: goals met" : "accuracy: goals missed");
  return ok;
}

class Client {
  constructor(private readonly url: string) {}
  async request(query: string, variables: unknown): Promise<unknown> {
    const response = await fetch(this.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: unknown; errors?: unknown[] };
    if (body.errors) throw new Error(`GraphQL errors: ${JSON.stringify(body.errors)}`);
    return body.data;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

await main();
