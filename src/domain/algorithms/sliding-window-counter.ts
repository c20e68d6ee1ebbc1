/**
 * SLIDING_WINDOW_COUNTER: the previous window's count, weighted by how much of
 * it still overlaps the trailing window, plus the current window's count.
 *
 * The weight is a fixed-point fraction in 1/65536ths, rounded up, so every
 * product stays an exact integer and the estimate never undercounts:
 *   weight(e) = ceil((W - e) * 65536 / W)           e = time into this window
 *   estimate  = previous * weight / 65536 + current
 * A request of cost c conforms when estimate + c <= limit.
 *
 * Under THROTTLE a request that does not fit waits for the earliest moment it
 * does, at most one window ahead; units released in the next window are kept
 * in `next`, and once any are, later requests queue behind them.
 *
 * The state carries its window length: after a rule's window changes, every
 * unit that still counted under the old window (the previous window's in
 * full) counts in the current window of the new one.
 */

import { divCeil, divFloor } from "./integer.js";
import { admitted, beyondCapacity, refused, type CounterState, type Evaluate, type Usage } from "./types.js";

/** A weight of one: weights count in 1/65536ths. decide.lua receives it in its prelude. */
export const WEIGHT_ONE = 65536;

export const evaluateSlidingWindowCounter: Evaluate = (state, now, params, cost, elsewhere = []) => {
  const { limit, windowMs } = params;
  const [window, localPrevious, local, localNext] = rollForward(state, now, windowMs);
  const [otherPrevious, otherCurrent, otherNext] = countedElsewhere(elsewhere, window, now, windowMs);
  const previous = localPrevious + otherPrevious;
  const current = local + otherCurrent;
  const next = localNext + otherNext;
  const elapsed = Math.max(0, now - window * windowMs);
  const usage = (prev: number, curr: number, queued: number): Usage => ({
    remaining: Math.max(0, limit - curr - queued - divCeil(prev * weight(elapsed, windowMs), WEIGHT_ONE)),
    resetAtMs: resetAt(window, windowMs, now, prev, curr, queued),
  });
  const currentUsage = usage(previous, current, next);
  if (cost > limit) return beyondCapacity(state, currentUsage, params);

  const throttle = params.action === "THROTTLE";
  const release = earliestRelease(previous, current, next, window, elapsed, windowMs, limit, cost, throttle && next > 0);
  const wait = release.at - now;
  if (!throttle) {
    if (wait > 0) return refused(state, wait, currentUsage);
    return admitted([window, localPrevious, local + cost, localNext, windowMs], 0, usage(previous, current + cost, next), currentUsage);
  }
  if (wait > windowMs) return refused(state, wait - windowMs, currentUsage);
  const inThisWindow = release.windowsAhead === 0;
  return admitted(
    [window, localPrevious, inThisWindow ? local + cost : local, inThisWindow ? localNext : localNext + cost, windowMs],
    wait,
    usage(previous, inThisWindow ? current + cost : current, inThisWindow ? next : next + cost),
    currentUsage,
  );
};

function weight(elapsed: number, windowMs: number): number {
  return divCeil((windowMs - elapsed) * WEIGHT_ONE, windowMs);
}

/**
 * The earliest time a request of `cost` fits, searching this window and the
 * three after it (by the fourth every count has aged out, and cost <= limit).
 */
function earliestRelease(
  previous: number,
  current: number,
  next: number,
  window: number,
  elapsed: number,
  windowMs: number,
  limit: number,
  cost: number,
  behindQueue: boolean,
): { at: number; windowsAhead: number } {
  const windows: [number, number, number][] = [
    [previous, current, elapsed],
    [current, next, 0],
    [next, 0, 0],
  ];
  for (let ahead = behindQueue ? 1 : 0; ahead < windows.length; ahead++) {
    const [prev, curr, from] = windows[ahead]!;
    const at = earliestInWindow(prev, curr, from, windowMs, limit, cost);
    if (at !== null) return { at: (window + ahead) * windowMs + at, windowsAhead: ahead };
  }
  return { at: (window + 3) * windowMs, windowsAhead: 3 };
}

/** The earliest elapsed time >= from, within one window, at which prev * weight + (curr + cost) fits the limit. */
function earliestInWindow(prev: number, curr: number, from: number, windowMs: number, limit: number, cost: number): number | null {
  const room = (limit - cost - curr) * WEIGHT_ONE;
  if (room < 0) return null;
  if (prev * weight(from, windowMs) <= room) return from;
  // weight(e) <= k  <=>  (W - e) * WEIGHT_ONE <= k * W  <=>  e >= W - floor(k * W / WEIGHT_ONE)
  const k = divFloor(room, prev);
  const at = windowMs - divFloor(k * windowMs, WEIGHT_ONE);
  return at < windowMs ? Math.max(at, from) : null;
}

function resetAt(window: number, windowMs: number, now: number, prev: number, curr: number, queued: number): number {
  if (queued > 0) return (window + 3) * windowMs;
  if (curr > 0) return (window + 2) * windowMs;
  if (prev > 0) return (window + 1) * windowMs;
  return now;
}

/** The state aged to `now` under the window it was counted in; after a window change its counts carry over. */
function rollForward(state: CounterState | undefined, now: number, windowMs: number): [number, number, number, number] {
  const window = Math.floor(now / windowMs);
  if (state === undefined || state.length < 5) return [window, 0, 0, 0];
  const [stored, previous, current, next, storedWindowMs] = state as [number, number, number, number, number];
  const [aged, prev, curr, queued] = age(stored, previous, current, next, Math.floor(now / storedWindowMs));
  if (storedWindowMs !== windowMs) return [window, 0, prev + curr + queued, 0];
  return [aged, prev, curr, queued];
}

/**
 * What other regions count in the previous window, this one and the next:
 * each state aged to now; a region whose clock has moved on to the next
 * window counts its previous window in our current and its current in our
 * next.
 */
function countedElsewhere(elsewhere: readonly CounterState[], window: number, now: number, windowMs: number): [number, number, number] {
  let previous = 0;
  let current = 0;
  let next = 0;
  for (const state of elsewhere) {
    const [theirs, prev, curr, queued] = rollForward(state, now, windowMs);
    if (theirs === window) {
      previous += prev;
      current += curr;
      next += queued;
    } else if (theirs === window + 1) {
      current += prev;
      next += curr;
    }
  }
  return [previous, current, next];
}

function age(stored: number, previous: number, current: number, next: number, window: number): [number, number, number, number] {
  if (stored >= window) return [stored, previous, current, next];
  if (stored === window - 1) return [window, current, next, 0];
  if (stored === window - 2) return [window, next, 0, 0];
  return [window, 0, 0, 0];
}

export const slidingWindowCounterHorizonMs = (windowMs: number): number => 3 * windowMs;
