/**
 * SLIDING_WINDOW_LOG: exact. The state is the release time of every admitted
 * unit still inside the trailing window (one entry per unit, oldest first);
 * entries older than the window are dropped whenever a request is counted, so
 * the log never holds more than limit entries, plus at most one window of
 * queued units under THROTTLE.
 *
 * A request of cost c conforms at time t when the units released in
 * (t - W, t] plus c stay within the limit. Under THROTTLE the line is first
 * in, first out: a request is released no earlier than the last queued unit,
 * at the first moment enough old units have left the window, and is refused
 * when that is more than one window away.
 */

import { admitted, beyondCapacity, refused, type Evaluate, type Usage } from "./types.js";

export const evaluateSlidingWindowLog: Evaluate = (state, now, params, cost) => {
  const { limit, windowMs } = params;
  const log = live(state ?? [], now - windowMs);
  const usage = (entries: readonly number[]): Usage => ({
    remaining: Math.max(0, limit - entries.length),
    resetAtMs: entries.length > 0 ? entries[entries.length - 1]! + windowMs : now,
  });
  const current = usage(log);
  if (cost > limit) return beyondCapacity(log, current, params);

  const throttle = params.action === "THROTTLE";
  const mustLeave = log.length + cost - limit;
  const notBefore = throttle && log.length > 0 ? Math.max(now, log[log.length - 1]!) : now;
  const release = mustLeave <= 0 ? notBefore : Math.max(notBefore, log[mustLeave - 1]! + windowMs);
  const wait = release - now;
  const allowedWait = throttle ? windowMs : 0;
  if (wait > allowedWait) return refused(log, wait - allowedWait, current);
  // Units queued by an earlier THROTTLE may lie ahead of now: never record a unit before them, so the log stays sorted.
  const stamp = log.length > 0 ? Math.max(release, log[log.length - 1]!) : release;
  const next = log.concat(new Array<number>(cost).fill(stamp));
  return admitted(next, wait, usage(next), current);
};

/** The entries released after `cutoff`; the log is sorted, so they are a suffix. */
function live(log: readonly number[], cutoff: number): readonly number[] {
  let first = 0;
  while (first < log.length && log[first]! <= cutoff) first++;
  return first === 0 ? log : log.slice(first);
}

/** A log may be forgotten one window after its last release. */
export const slidingWindowLogExpiresAt = (log: readonly number[], nowMs: number, windowMs: number): number =>
  (log.length > 0 ? Math.max(nowMs, log[log.length - 1]!) : nowMs) + windowMs;
