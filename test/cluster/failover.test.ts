/**
 * The CI smoke of a Redis Cluster failover through the whole service: a
 * master killed under load, its replica promoted. Checks never fail: while
 * the lost slots have no master each rule decides by its failure mode (and
 * says degraded), and once the replica is promoted checks on those slots are
 * decided by Redis again. Counters on the other masters keep what they held.
 * The figures are printed; `npm run cluster:failover` measures them on a
 * longer run (docs/redis-cluster.md).
 */

import { describe, expect, it } from "vitest";
import { describeFailover, phaseOf, runClusterFailover } from "../harness/cluster-failover.js";
import { redisBinariesAvailable } from "../support/services.js";

describe.runIf(await redisBinariesAvailable())("a Redis Cluster master killed under load", () => {
  it("is followed: checks go by failure mode meanwhile, then back to Redis on the promoted replica, other shards untouched", async () => {
    // A generous deadline: on a busy CI machine only the lost shard should send checks to their failure mode.
    const report = await runClusterFailover({ callers: 8, warmupMs: 300, afterMs: 300, resumeWithinMs: 30_000, redisTimeoutMs: 1_000 });
    for (const line of describeFailover(report)) console.log(`cluster failover: ${line}`);

    expect(report.checks.filter((c) => c.failed)).toEqual([]);
    const degraded = report.checks.filter((c) => c.degraded);
    expect(degraded.filter((c) => c.allowed !== (c.mode === "OPEN"))).toEqual([]);
    expect(report.checks.some((c) => c.shard === "lost" && c.degraded && phaseOf(c, report) === "no master")).toBe(true);
    expect(Number.isFinite(report.resumedAtMs)).toBe(true);
    const after = report.checks.filter((c) => phaseOf(c, report) === "after");
    expect(after.filter((c) => c.shard === "lost" && !c.degraded).length).toBeGreaterThan(0);
    expect(report.idle.after).toEqual(report.idle.before);
  }, 60_000);
});
