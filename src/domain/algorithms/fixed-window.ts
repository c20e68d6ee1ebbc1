/**
 * FIXED_WINDOW: one counter per window aligned on the epoch.
 *
 * Under THROTTLE a request that does not fit this window waits for the start
 * of the next one and is counted there (`next`), so a downstream never sees
 * more than the limit in any window; when the next window is full too, the
 * request is refused.
 *
 * The state carries its window length: after a rule's window changes, what
 * still counted under the old window counts in the current window of the new
 * one.
 */

import { admitted, beyondCapacity, refused, type CounterState, type Evaluate, type Usage } from "./types.js";

export const evaluateFixedWindow: Evaluate = (state, now, params, cost, elsewhere = []) => {
  const { limit, windowMs } = params;
  const [window, local, localNext] = rollForward(state, now, windowMs);
  const [otherCurrent, otherNext] = countedElsewhere(elsewhere, window, now, windowMs);
  const current = local + otherCurrent;
  const next = localNext + otherNext;
  const windowEnd = (window + 1) * windowMs;
  const usage = (curr: number, queued: number): Usage => ({
    remaining: Math.max(0, limit - curr - queued),
    resetAtMs: queued > 0 ? windowEnd + windowMs : curr > 0 ? windowEnd : now,
  });
  const currentUsage = usage(current, next);
  if (cost > limit) return beyondCapacity(state, currentUsage, params);

  if (current + cost <= limit) {
    return admitted([window, local + cost, localNext, windowMs], 0, usage(current + cost, next), currentUsage);
  }
  const throttle = params.action === "THROTTLE";
  if (throttle && next + cost <= limit) {
    return admitted([window, local, localNext + cost, windowMs], windowEnd - now, usage(current, next + cost), currentUsage);
  }
  // At the next window `next` becomes the count; under THROTTLE a request can always queue then.
  const waitWindows = throttle || next + cost <= limit ? 0 : 1;
  return refused(state, windowEnd + waitWindows * windowMs - now, currentUsage);
};

/** The state aged to `now` under the window it was counted in; after a window change its counts carry over. */
function rollForward(state: CounterState | undefined, now: number, windowMs: number): [number, number, number] {
  const window = Math.floor(now / windowMs);
  if (state === undefined || state.length < 4) return [window, 0, 0];
  const [stored, current, next, storedWindowMs] = state as [number, number, number, number];
  const [aged, curr, queued] = age(stored, current, next, Math.floor(now / storedWindowMs));
  if (storedWindowMs !== windowMs) return [window, curr + queued, 0];
  return [aged, curr, queued];
}

/**
 * What other regions count in this window and the next: each state aged to
 * now; a region whose clock has moved on to the next window counts its
 * current window in our next.
 */
function countedElsewhere(elsewhere: readonly CounterState[], window: number, now: number, windowMs: number): [number, number] {
  let current = 0;
  let next = 0;
  for (const state of elsewhere) {
    const [theirs, curr, queued] = rollForward(state, now, windowMs);
    if (theirs === window) {
      current += curr;
      next += queued;
    } else if (theirs === window + 1) {
      next += curr;
    }
  }
  return [current, next];
}

function age(stored: number, current: number, next: number, window: number): [number, number, number] {
  if (stored >= window) return [stored, current, next];
  if (stored === window - 1) return [window, next, 0];
  return [window, 0, 0];
}

export const fixedWindowHorizonMs = (windowMs: number): number => 2 * windowMs;
