/**
 * What usage counting costs the check path, without the network or Redis in
 * the way: `npm run usage:bench`. The limiter decides the bench's single
 * checks (scripts/bench/workload.ts: 10 rules, 3 of them apply to each check)
 * on the in-process counter store, once with a UsageRecorder and once without,
 * interleaved round after round (in turns first and second), and prints the CPU per check of each (the
 * median over the rounds) and their ratio. The recorder flushes every
 * USAGE_FLUSH_MS's default, 5 s, into the in-process usage store, so its
 * flushes are measured too. `npm run bench` has the same comparison end to
 * end ("floodgate, usage counting off"), where the machine's noise is larger
 * than the difference.
 */

import type { Principal } from "../src/domain/access.js";
import { systemClock } from "../src/domain/ports.js";
import type { CheckRequest } from "../src/domain/request.js";
import { Limiter } from "../src/engine/decision/limiter.js";
import { RuleBook } from "../src/engine/decision/rule-book.js";
import { UsageRecorder } from "../src/engine/usage/usage-recorder.js";
import { MemoryCounterStore } from "../src/store/memory/memory-counter-store.js";
import { MemoryUsageStore } from "../src/store/memory/memory-usage-store.js";
import { NO_ATTRIBUTES } from "../src/domain/attributes.js";
import { CALLERS, TENANT, ruleSet } from "./bench/workload.js";

const ROUNDS = Number(process.env.USAGE_BENCH_ROUNDS ?? 7);
const CHECKS = Number(process.env.USAGE_BENCH_CHECKS ?? 200_000);
const ADMIN: Principal = { keyId: "bench", tenantId: "*", role: "ADMIN" };

const requests: CheckRequest[] = CALLERS.map((c) => ({ tenantId: TENANT, userId: c.userId, ip: c.ip, apiKey: null, userAgent: null, cookie: null, resource: c.resource, method: c.method, attributes: NO_ATTRIBUTES, cost: 1, dryRun: false, ignorePathCase: false }));

function limiter(usage: UsageRecorder | undefined): Limiter {
  const book = new RuleBook();
  book.load(ruleSet(10));
  return new Limiter(book, new MemoryCounterStore({ sweepIntervalMs: 0 }), null, systemClock, { usage });
}

/** CPU microseconds per check of `CHECKS` checks, one at a time as single checks arrive. */
async function measure(subject: Limiter): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < CHECKS; i++) await subject.check(ADMIN, [requests[i % requests.length]!]);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / CHECKS;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

const recorder = new UsageRecorder({ store: new MemoryUsageStore(), clock: systemClock, instanceId: "bench", flushMs: 5000 });
const subjects = { off: limiter(undefined), on: limiter(recorder) };
const runs = { off: [] as number[], on: [] as number[] };
await measure(subjects.off);
await measure(subjects.on);
// Each round in the other order than the last, so that whatever one run leaves behind (garbage to collect) falls on both alike.
for (let round = 0; round < ROUNDS; round++) {
  for (const which of round % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const)) runs[which].push(await measure(subjects[which]));
}
await recorder.close();
const [off, on] = [median(runs.off), median(runs.on)];
console.log(`usage counting, ${ROUNDS} rounds of ${CHECKS.toLocaleString("en")} single checks (3 rules each) on the in-process store, median CPU per check:`);
console.log(`  off: ${off.toFixed(2)} µs   on: ${on.toFixed(2)} µs   on/off: ${(on / off).toFixed(3)}x (+${(on - off).toFixed(2)} µs)`);
