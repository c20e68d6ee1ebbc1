/**
 * `npm run accuracy:simulate`: the sliding window counter's error with no
 * service in the way. It runs the engine's own arithmetic
 * (evaluateSlidingWindowCounter, the twin of lua/decide.lua) on seeded Poisson
 * traffic and judges each decision against the exact trailing window, for
 * several limits and for traffic around and under the limit. What the accuracy
 * harness measures through the service should agree with this; where it does,
 * the error is the estimator's, not the implementation's.
 */

import { evaluateSlidingWindowCounter } from "../../src/domain/algorithms/sliding-window-counter.js";
import type { CounterState, LimitParams } from "../../src/domain/algorithms/types.js";
import { judgeTrailingWindow, sum, type Judged, type Observed } from "./truth.js";

const WINDOW_MS = 2_000;
const WINDOWS = 600;
/** Users per row: fewer for larger limits, whose users each make proportionally more decisions. */
const usersFor = (limit: number) => Math.max(10, 2_000 / limit);
const LIMITS = [10, 100, 1_000];
/** Rates as multiples of the limit: the accuracy harness's "poisson" and "light" phases. */
const RATE_RANGES: [string, number, number][] = [
  ["around the limit (0.5-1.5x)", 0.5, 1.5],
  ["under the limit (0.05-0.5x)", 0.05, 0.5],
];

/** mulberry32: a small seeded generator, so that every run prints the same figures. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function simulateUser(limit: number, rate: number, random: () => number): Judged {
  const params: LimitParams = { algorithm: "SLIDING_WINDOW_COUNTER", limit, windowMs: WINDOW_MS, capacity: limit, action: "REJECT" };
  const meanGapMs = WINDOW_MS / (limit * rate);
  const observed: Observed[] = [];
  let state: CounterState | undefined;
  let at = 0;
  for (;;) {
    at += -Math.log(1 - random()) * meanGapMs;
    if (at >= WINDOWS * WINDOW_MS) break;
    // Redis TIME is read in whole milliseconds.
    const now = Math.floor(at);
    const { verdict, next } = evaluateSlidingWindowCounter(state, now, params, 1);
    if (verdict.conforming) state = next;
    observed.push({ atMs: now, allowed: verdict.conforming });
  }
  return judgeTrailingWindow(observed, { limit, windowMs: WINDOW_MS, capacity: limit });
}

const random = seededRandom(20261130);
console.log(`sliding window counter against the exact trailing window: ${WINDOWS} windows of ${WINDOW_MS} ms each`);
const rows = [["limit", "traffic", "users", "decisions", "wrongly admitted", "wrongly denied", "wrong decisions", "over-admission (worst window)"]];
for (const limit of LIMITS) {
  for (const [traffic, lowest, highest] of RATE_RANGES) {
    const users = Array.from({ length: usersFor(limit) }, () => simulateUser(limit, lowest + random() * (highest - lowest), random));
    const total = sum(users);
    const share = (total.wronglyAdmitted + total.wronglyDenied) / Math.max(1, total.decisions);
    rows.push([
      String(limit),
      traffic,
      String(users.length),
      String(total.decisions),
      String(total.wronglyAdmitted),
      String(total.wronglyDenied),
      `${(share * 100).toFixed(3)}%`,
      String(total.worstOverAdmission),
    ]);
  }
}
const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const row of rows) console.log(row.map((cell, c) => cell.padEnd(widths[c]!)).join("  "));
