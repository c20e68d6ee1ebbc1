/**
 * The over-limit cache against an older version of itself, side by side:
 * `npm run cache:bench` (against main's) or `npm run cache:bench -- --old <git ref>`.
 *
 * What it measures is what an attack on it does: every request a new refused
 * bucket (a new user, a new IP), so that once the cache is full every insert
 * evicts one entry, and some buckets are forgotten along the way (resets,
 * expired entries met again). Both caches are filled to --size entries, then
 * take --rounds rounds of --inserts inserts each, the old and the new version
 * alternating round by round so that the machine's drift falls on both alike.
 * Printed per version: inserts per second in the first and the last round, and
 * the ratio new / old over all rounds; only the ratios mean anything on a
 * shared machine.
 */

import type { BucketOutcome, LimitParams } from "../src/domain/algorithms/index.js";
import type { BucketRef } from "../src/domain/ports.js";
import { OverLimitCache } from "../src/engine/decision/over-limit-cache.js";
import { numberOption } from "../test/harness/number-option.js";
import { importOldVersion, oldRef } from "../test/harness/old-version.js";

const OLD_REF = oldRef();
const SIZE = numberOption("size", 100_000);
const INSERTS = numberOption("inserts", 25_000);
const ROUNDS = numberOption("rounds", 10);
/** One bucket in this many is forgotten right after the next insert (a reset, an expired entry met again). */
const FORGET_EVERY = 3;

type Cache = Pick<OverLimitCache, "remember" | "forget" | "size">;

const PARAMS: LimitParams = { algorithm: "FIXED_WINDOW", limit: 1, windowMs: 60_000, capacity: 1, action: "REJECT" };
const REFUSAL: BucketOutcome = { conforming: false, remaining: 0, resetAtMs: 60_000, retryAfterMs: 60_000, delayMs: 0 };

class Attack {
  private next = 0;

  constructor(readonly name: string, readonly cache: Cache) {}

  /** Inserts `count` new refused buckets; returns inserts per second. */
  round(count: number): number {
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      const n = this.next++;
      const bucket: BucketRef = { ruleId: "r", key: ipKey(n), params: PARAMS };
      this.cache.remember(bucket, 1, REFUSAL, 0, 0);
      if (n % FORGET_EVERY === 0 && n > 0) this.cache.forget("r", ipKey(n - 1));
    }
    return count / ((performance.now() - started) / 1000);
  }
}

/** The n-th attacking address's bucket key. */
function ipKey(n: number): string {
  return `ip:10.${n >>> 16}.${(n >>> 8) & 255}.${n & 255}`;
}

async function main(): Promise<void> {
  const old = await importOldVersion<{ OverLimitCache: new (size: number) => Cache }>(OLD_REF, ["src/engine/decision/over-limit-cache.ts", "src/engine/over-limit-cache.ts"]);
  try {
    const attacks = [new Attack(`${OLD_REF}'s`, new old.module.OverLimitCache(SIZE)), new Attack("this tree's", new OverLimitCache(SIZE))];
    for (const attack of attacks) while (attack.cache.size < SIZE) attack.round(INSERTS);
    const rates = attacks.map(() => [] as number[]);
    for (let round = 0; round < ROUNDS; round++) attacks.forEach((attack, i) => rates[i]!.push(attack.round(INSERTS)));
    console.log(`full cache of ${SIZE} entries, ${ROUNDS} rounds of ${INSERTS} new refused buckets, one in ${FORGET_EVERY} forgotten`);
    attacks.forEach((attack, i) => {
      const r = rates[i]!;
      console.log(`${attack.name.padEnd(16)} inserts/s: first round ${Math.round(r[0]!)}, last round ${Math.round(r.at(-1)!)}, slowest ${Math.round(Math.min(...r))}`);
    });
    const total = (r: number[]) => (INSERTS * r.length) / r.reduce((sum, rate) => sum + INSERTS / rate, 0);
    console.log(`this tree / ${OLD_REF}: ${(total(rates[1]!) / total(rates[0]!)).toFixed(1)}x the inserts per second over all rounds`);
  } finally {
    await old.remove();
  }
}

await main();
