/**
 * Glob matching against an older version of src/domain/glob.ts, side by side:
 * `npm run glob:bench` (against main's) or `npm run glob:bench -- --old <git ref>`.
 *
 * Three workloads, each a set of globs matched against one path as a check
 * meets a tenant's rules: the issue's attack (200 rules of "/*" + 508 × "a" +
 * "b" against a 2,048-character path), a tenant at the rule quota whose
 * 1,000 rules have the costliest globs validateGlob accepts, against the
 * longest paths, and ordinary globs against ordinary paths (nothing may get
 * slower there). The old and the new version alternate, round by round; the
 * medians of --rounds rounds of --seconds each are printed as checks per
 * second, and as the ratio new / old, the only figure that means anything on
 * a shared machine.
 */

import { compileGlob } from "../src/domain/glob.js";
import { LIMITS } from "../src/domain/request.js";
import { COSTLIEST_GLOBS, costlyPaths } from "../test/harness/hostile-input.js";
import { numberOption } from "../test/harness/number-option.js";
import { importOldVersion, oldRef } from "../test/harness/old-version.js";

const OLD_REF = oldRef();
const ROUNDS = numberOption("rounds", 5);
const SECONDS = numberOption("seconds", 1);

interface Glob {
  matches(path: string): boolean;
}
type Compile = (source: string) => Glob;

interface Workload {
  name: string;
  globs: string[];
  paths: string[];
}

const [longPath] = costlyPaths(LIMITS.resource) as [string];

const WORKLOADS: Workload[] = [
  { name: 'the attack: 200 x "/*" + 508 a + "b", 2,048-char path', globs: Array(200).fill("/*" + "a".repeat(508) + "b"), paths: [longPath] },
  {
    name: "a tenant at the rule quota: 1,000 of the costliest globs validation accepts, longest paths",
    globs: Array.from({ length: 1000 }, (_, i) => COSTLIEST_GLOBS[i % COSTLIEST_GLOBS.length]!),
    paths: costlyPaths(LIMITS.resource),
  },
  {
    name: "ordinary globs and paths",
    globs: ["/api/v1/orders", "/api/v1/*", "/api/**", "/files/*.pdf", "/v?/items", "/a/**/z", "/**/admin/**", "/users/*/orders/*"],
    paths: ["/api/v1/orders", "/api/v1/orders/42", "/files/report.pdf", "/users/42/orders/7", "/v1/items", "/a/b/c/z", "/x/admin/y"],
  },
];

/** Checks per second: every glob of the workload against one path per check, for SECONDS (and at least one check). */
function measure(compiled: Glob[], paths: readonly string[]): number {
  const started = performance.now();
  let elapsed = 0;
  let checks = 0;
  let matched = 0;
  for (; elapsed < SECONDS * 1000; elapsed = performance.now() - started) {
    const path = paths[checks % paths.length]!;
    for (const glob of compiled) if (glob.matches(path)) matched++;
    checks++;
  }
  if (matched < 0) throw new Error("unreachable: keeps the matches from being optimised away");
  return checks / (elapsed / 1000);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const old = await importOldVersion<{ compileGlob: Compile }>(OLD_REF, "src/domain/glob.ts");
  try {
    console.log(`${ROUNDS} rounds of ${SECONDS} s per version and workload, ${OLD_REF}'s glob.ts and this tree's alternating`);
    for (const workload of WORKLOADS) {
      const versions = [old.module.compileGlob, compileGlob as Compile].map((compile) => workload.globs.map((source) => compile(source)));
      const rates: number[][] = [[], []];
      for (let round = 0; round < ROUNDS; round++) versions.forEach((globs, i) => rates[i]!.push(measure(globs, workload.paths)));
      const [before, after] = rates.map(median) as [number, number];
      console.log(`${workload.name}: ${OLD_REF} ${before.toFixed(1)} checks/s, this tree ${after.toFixed(1)} checks/s, ratio ${(after / before).toFixed(2)}`);
    }
  } finally {
    await old.remove();
  }
}

await main();
