/**
 * The accuracy harness's CI smoke: a short run of `npm run accuracy` must
 * finish, print its table, and find no over-admission by the exact algorithms
 * (the script exits 1 otherwise). The full run's figures are in BENCHMARKS.md.
 */

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { postgresAvailable, redisAvailable } from "../support/services.js";

const run = promisify(execFile);
const ROOT = new URL("../../", import.meta.url).pathname;

describe.runIf((await redisAvailable()) && (await postgresAvailable()))("npm run accuracy -- --short", () => {
  it("judges every algorithm and finds the exact ones exact", async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", "scripts/accuracy.ts", "--short"], { cwd: ROOT, timeout: 120_000 });
    for (const algorithm of ["SLIDING_WINDOW_LOG", "FIXED_WINDOW", "TOKEN_BUCKET", "LEAKY_BUCKET", "SLIDING_WINDOW_COUNTER"]) {
      expect(stdout).toMatch(new RegExp(`^${algorithm}\\s+contention\\s+\\d+`, "m"));
    }
    expect(stdout).toContain("accuracy: goals met");
  }, 150_000);
});
