/**
 * A master of a Redis Cluster killed under load, with Floodgate in front:
 * shared by the CI smoke (test/cluster/failover.test.ts) and the measurement
 * (`npm run cluster:failover`).
 *
 * It starts a cluster (3 masters, 3 replicas, node timeout 1 s) and the
 * service on it, with two tenants whose per-user rule fails OPEN and CLOSED
 * respectively, picks users whose bucket lives on the master it will kill
 * ("lost shard") and users on the others, and fills a few idle buckets on the
 * other masters. Callers check in closed loops; after `warmupMs` the master
 * gets SIGKILL. The run goes on until checks on the lost shard are decided by
 * Redis again, then `afterMs` more. It reports, per phase and shard, how checks
 * were decided, and whether the idle buckets on the other masters still hold
 * exactly what they held.
 */

import { loadSettings } from "../../src/config/settings.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import type { GraphQLClient } from "./graphql-client.js";
import { startInProcessApp, type TestApp } from "./in-process-app.js";
import { startRedisCluster, type LocalRedisCluster } from "./local-redis.js";

export interface FailoverRun {
  callers: number;
  warmupMs: number;
  afterMs: number;
  /** Longest wait for checks on the lost shard to be decided by Redis again. */
  resumeWithinMs: number;
  /** REDIS_TIMEOUT_MS for the service; its default otherwise. */
  redisTimeoutMs?: number;
}

/** Before the kill; while the lost slots have no master; from the promotion until checks on them are decided by Redis for good; after. */
export type Phase = "before" | "no master" | "catching up" | "after";
export type Shard = "lost" | "others";
const MODES = ["OPEN", "CLOSED"] as const;
type Mode = (typeof MODES)[number];

export interface Check {
  user: string;
  sentMs: number;
  latencyMs: number;
  mode: Mode;
  shard: Shard;
  allowed: boolean;
  degraded: boolean;
  /** A GraphQL error instead of a decision. */
  failed: boolean;
}

export interface FailoverReport {
  /** From the kill to the cluster naming the replica master of the lost slots. */
  promotionMs: number;
  /** From the kill to the checks on the lost shard being decided by Redis again (for 200 ms in a row); NaN if not within resumeWithinMs. */
  gapMs: number;
  checks: Check[];
  killedAtMs: number;
  resumedAtMs: number;
  /** Units in the idle buckets on the other masters, before the kill and after the run. */
  idle: { before: number[]; after: number[] };
  /** Per shard: the units of the checks Redis admitted, and the units its buckets hold after the run. */
  units: Record<Shard, { admitted: number; held: number }>;
}

const PREFIX = "fgfailover:";
const LIMIT = 1_000_000;
const IDLE_LIMIT = 100;
const CHECK = "query($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed degraded results { key remaining allowed } } }";
const CREATE = "mutation($i: CreateRuleInput!) { createRule(input: $i) { id } }";

interface Decision {
  allowed: boolean;
  degraded: boolean;
  results: { key: string; remaining: number; allowed: boolean }[];
}

export async function runClusterFailover(run: FailoverRun): Promise<FailoverReport> {
  const cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
  let service: TestApp | null = null;
  try {
    service = await startInProcessApp({
      REDIS_CLUSTER_NODES: cluster.nodes.map((n) => `${n.host}:${n.port}`).join(","),
      REDIS_KEY_PREFIX: PREFIX,
      REDIS_TIMEOUT_MS: String(run.redisTimeoutMs ?? loadSettings({}).redisTimeoutMs),
    });
    return await underLoad(cluster, service.client, run);
  } finally {
    try {
      await service?.stop();
    } finally {
      await cluster.stop();
    }
  }
}

async function underLoad(cluster: LocalRedisCluster, client: GraphQLClient, run: FailoverRun): Promise<FailoverReport> {
  const check = async (tenantId: string, userId: string, options: { cost?: number; dryRun?: boolean } = {}): Promise<Decision | null> => {
    const { data, errors } = await client.raw<{ checkLimits: Decision }>({ query: CHECK, variables: { r: { tenantId, userId, ...options } } });
    return errors?.length || !data ? null : data.checkLimits;
  };
  const create = async (tenantId: string, limit: number, failureMode: Mode) => {
    const { data } = await client.raw<{ createRule: { id: string } }>({
      query: CREATE,
      variables: { i: { tenantId, name: "per-user", scope: ["USER"], algorithm: "FIXED_WINDOW", limit, window: 1, windowUnit: "HOURS", failureMode } },
    });
    return data!.createRule.id;
  };

  const layout = new KeyLayout(PREFIX, loadSettings({}).redisPages);
  const victim = await cluster.masterOf(0);
  const masterPortOf = async (tenantId: string, ruleId: string, userId: string) => {
    const key = (await check(tenantId, userId, { dryRun: true }))!.results[0]!.key;
    return (await cluster.masterOf(layout.slotOf(ruleId, layout.field(key)))).port;
  };
  /** `count` users of the tenant whose bucket is (or is not) on the victim. */
  const users = async (tenantId: string, ruleId: string, onVictim: boolean, count: number) => {
    const chosen: string[] = [];
    for (let i = 0; chosen.length < count; i++) {
      if (((await masterPortOf(tenantId, ruleId, `u${i}`)) === victim.port) === onVictim) chosen.push(`u${i}`);
    }
    return chosen;
  };

  const pools: { tenantId: string; mode: Mode; shard: Shard; users: string[] }[] = [];
  for (const mode of MODES) {
    const tenantId = `failover-${mode}`;
    const ruleId = await create(tenantId, LIMIT, mode);
    pools.push({ tenantId, mode, shard: "lost", users: await users(tenantId, ruleId, true, 4) });
    pools.push({ tenantId, mode, shard: "others", users: await users(tenantId, ruleId, false, 4) });
  }
  const idleRule = await create("failover-idle", IDLE_LIMIT, "OPEN");
  const idleUsers = await users("failover-idle", idleRule, false, 4);
  /**
   * What a bucket holds: its limit less what a dry run finds left (a dry run
   * reports as if its one unit were admitted); asked until Redis answers,
   * for up to 5 s (NaN if it never does).
   */
  const held = async (tenantId: string, user: string, limit: number) => {
    for (let waited = 0; waited < 5_000; waited += 20) {
      const decision = await check(tenantId, user, { dryRun: true });
      if (decision && !decision.degraded) return limit - decision.results[0]!.remaining - (decision.allowed ? 1 : 0);
      await sleep(20);
    }
    return Number.NaN;
  };
  const idleUnits = () => Promise.all(idleUsers.map((user) => held("failover-idle", user, IDLE_LIMIT)));
  for (const [i, user] of idleUsers.entries()) await check("failover-idle", user, { cost: i + 1 });
  const idleBefore = await idleUnits();

  const checks: Check[] = [];
  const started = performance.now();
  let killedAtMs = Number.POSITIVE_INFINITY;
  let promotionMs = Number.NaN;
  let stopAtMs = Number.POSITIVE_INFINITY;
  let resumedAtMs = Number.NaN;
  /** When the checks on the lost shard sent since were all decided by Redis; null while the last one was not. */
  const decidedByRedisSince = () => {
    const lost = checks.filter((c) => c.shard === "lost" && c.sentMs >= killedAtMs);
    const lastDegraded = Math.max(killedAtMs, ...lost.filter((c) => c.degraded || c.failed).map((c) => c.sentMs));
    const since = Math.min(...lost.filter((c) => !c.degraded && !c.failed && c.sentMs > lastDegraded).map((c) => c.sentMs));
    return Number.isFinite(since) ? since : null;
  };

  const chaos = async () => {
    await sleep(run.warmupMs);
    cluster.kill(victim);
    killedAtMs = performance.now() - started;
    while ((await cluster.masterOf(0).catch(() => victim)).port === victim.port) await sleep(20);
    promotionMs = performance.now() - started - killedAtMs;
    const deadline = killedAtMs + run.resumeWithinMs;
    // Resumed: every check on the lost shard decided by Redis for at least 200 ms.
    for (;;) {
      const since = decidedByRedisSince();
      const now = performance.now() - started;
      if (since !== null && now - since >= 200) {
        resumedAtMs = since;
        break;
      }
      if (now >= deadline) break;
      await sleep(20);
    }
    stopAtMs = performance.now() - started + run.afterMs;
  };
  const caller = async (n: number) => {
    for (let i = n; performance.now() - started < stopAtMs; i++) {
      const pool = pools[i % pools.length]!;
      const user = pool.users[Math.floor(i / pools.length) % pool.users.length]!;
      const sent = performance.now();
      const decision = await check(pool.tenantId, user);
      checks.push({
        user,
        sentMs: sent - started,
        latencyMs: performance.now() - sent,
        mode: pool.mode,
        shard: pool.shard,
        allowed: decision?.allowed ?? false,
        degraded: decision?.degraded ?? false,
        failed: decision === null,
      });
    }
  };
  await Promise.all([chaos(), ...Array.from({ length: run.callers }, (_, n) => caller(n))]);
  checks.sort((a, b) => a.sentMs - b.sentMs);
  const units = { lost: { admitted: 0, held: 0 }, others: { admitted: 0, held: 0 } };
  for (const pool of pools) {
    const mine = checks.filter((c) => c.mode === pool.mode && c.shard === pool.shard);
    units[pool.shard].admitted += mine.filter((c) => c.allowed && !c.degraded).length;
    for (const user of pool.users) units[pool.shard].held += await held(pool.tenantId, user, LIMIT);
  }
  return {
    units,
    promotionMs,
    gapMs: resumedAtMs - killedAtMs,
    checks,
    killedAtMs,
    resumedAtMs,
    idle: { before: idleBefore, after: await idleUnits() },
  };
}

export function phaseOf(check: Check, report: FailoverReport): Phase {
  if (check.sentMs < report.killedAtMs) return "before";
  if (check.sentMs < report.killedAtMs + report.promotionMs) return "no master";
  return check.sentMs < report.resumedAtMs ? "catching up" : "after";
}

/** One line per phase and shard: checks, how they were decided, latency. */
export function describeFailover(report: FailoverReport): string[] {
  const lines = [
    `killed a master at ${report.killedAtMs.toFixed(0)} ms; replica promoted ${report.promotionMs.toFixed(0)} ms later; ` +
      (Number.isFinite(report.gapMs)
        ? `checks on its slots decided by Redis again ${report.gapMs.toFixed(0)} ms after the kill`
        : "checks on its slots never decided by Redis for 200 ms in a row within the run"),
    "phase        shard    checks  by Redis  degraded (OPEN allowed, CLOSED denied)  errors  p50 ms  p99 ms  max ms",
  ];
  for (const phase of ["before", "no master", "catching up", "after"] as const) {
    for (const shard of ["lost", "others"] as const) {
      const list = report.checks.filter((c) => c.shard === shard && phaseOf(c, report) === phase);
      const degraded = list.filter((c) => c.degraded);
      const followed = degraded.filter((c) => c.allowed === (c.mode === "OPEN")).length;
      const latencies = list.map((c) => c.latencyMs).sort((a, b) => a - b);
      const q = (p: number) => (latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0).toFixed(1);
      lines.push(
        [
          phase.padEnd(12),
          shard.padEnd(7),
          String(list.length).padStart(7),
          String(list.filter((c) => !c.degraded && !c.failed).length).padStart(9),
          `${degraded.length} (${followed} by their failure mode)`.padStart(40),
          String(list.filter((c) => c.failed).length).padStart(7),
          q(0.5).padStart(7),
          q(0.99).padStart(7),
          (latencies.at(-1) ?? 0).toFixed(1).padStart(7),
        ].join(" "),
      );
    }
  }
  lines.push(`idle buckets on the other masters: units before ${JSON.stringify(report.idle.before)}, after ${JSON.stringify(report.idle.after)}`);
  for (const shard of ["lost", "others"] as const) {
    const { admitted, held } = report.units[shard];
    lines.push(`${shard === "lost" ? "the lost shard" : "the other shards"}: ${admitted} units admitted by Redis, ${held} held by their buckets after the run`);
  }
  return lines;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
