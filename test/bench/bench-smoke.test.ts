/**
 * The benchmark's CI smoke: `npm run bench -- --smoke` runs every scenario for
 * a fraction of a second and prints the table. It checks that the harness
 * works, never a figure: performance is read from the full run's table.
 */

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { postgresAvailable, redisAvailable } from "../support/services.js";

const run = promisify(execFile);
const available = (await redisAvailable()) && (await postgresAvailable());

describe.runIf(available)("npm run bench -- --smoke", () => {
  it("runs every scenario and prints the table, the ceiling and the goals", { timeout: 240_000 }, async () => {
    const { stdout } = await run("npm", ["run", "bench", "--silent", "--", "--smoke"], { maxBuffer: 1 << 20 });
    // Columns widen with their widest figure (a 1,000 ms latency on a loaded machine): any padding.
    expect(stdout).toMatch(/\| scenario +\| server +\| conns +\| decisions\/s +\| p50 ms +\| p99 ms +\| p99\.9 ms +\| CPU µs\/decision +\| Redis µs +\| load gen µs +\|/);
    for (const scenario of [
      "single check",
      "checkLimitsBatch of 100",
      "attack on one key over its limit",
      "client, 32 concurrent callers",
      "client, 32 callers, batch.parallel 1",
      "client, attack on one key",
      "gRPC ShouldRateLimit, 32 concurrent streams",
    ]) expect(stdout).toContain(`| ${scenario}`);
    // The client's rows are measured right after the baseline at 32 connections their goal compares them with.
    const rows = stdout.split("\n").filter((line) => line.startsWith("| "));
    const baseline32 = rows.findIndex((row) => /^\| single check +\| baseline \(rate-limiter-flexible\) +\| +32 \|/.test(row));
    expect(baseline32).toBeGreaterThan(0);
    expect(rows[baseline32 + 1]).toMatch(/^\| client, 32 concurrent callers /);
    // The ceiling is a row of its own, measured in each round beside the batch row, whose goal is its share of it round by round.
    expect(stdout).toMatch(/\| the ceiling +\| redis-benchmark, decide\.lua alone +\| +32 \| +[\d,]+ \|/);
    expect(stdout).toMatch(/checkLimitsBatch of 100 >= 60% of the redis-benchmark ceiling +\d+% \([\d,]+ of [\d,]+\)/);
    expect(stdout).toContain("goals (ratios from the same run, taken round by round");
    expect(stdout).not.toMatch(/failed\)/);
  });
});
