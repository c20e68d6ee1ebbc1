/**
 * FIXED_WINDOW: one counter per window aligned on the epoch.
 *
 * Under THROTTLE a request that does not fit this window waits for the start
 * of the next one and is counted there (`next`), so a downstream never sees
 * more than the limit in any window; when the next window is full too, the
 * request is refused.
 *
 * With a calendar (src/domain/calendar.ts) the window is the calendar's
 * period containing now instead, its index the period's start: so the count
 * starts again at the true start of a month, a day of 23 hours is 23 hours
 * long, and the reset is the period's end.
 *
 * The state carries its window length (a calendar's marker in its place):
 * after a rule's window changes, what still counted under the old window
 * counts in the current window of the new one. A state counted under a
 * calendar the rule no longer has cannot be aged (the instance no longer
 * knows its periods): it carries its counts over whole, an over-count at most
 * once, never an over-admission.
 */

import { calendarBoundaries, calendarMarker } from "../calendar.js";
import { admitted, beyondCapacity, refused, type CounterState, type Evaluate, type LimitParams, type Usage } from "./types.js";

/**
 * The fixed window containing `now`: its index, the indexes of the windows
 * before and after it, where it and the next one end, and the length its
 * states carry. A calendar's come from its period boundaries, which for the
 * memory store are computed at its own now (lua/decide.lua picks, among the
 * boundaries an instance sends, the period containing Redis's now).
 */
export interface WindowFrame {
  index: number;
  previous: number;
  next: number;
  endMs: number;
  nextEndMs: number;
  length: number;
}

export function windowFrame(now: number, params: Pick<LimitParams, "windowMs" | "calendar">): WindowFrame {
  const { windowMs, calendar } = params;
  if (calendar === undefined) {
    const index = Math.floor(now / windowMs);
    return { index, previous: index - 1, next: index + 1, endMs: (index + 1) * windowMs, nextEndMs: (index + 2) * windowMs, length: windowMs };
  }
  const [, previous, start, end, nextEnd] = calendarBoundaries(now, calendar) as [number, number, number, number, number, number];
  return { index: start, previous, next: end, endMs: end, nextEndMs: nextEnd, length: calendarMarker(calendar) };
}

export const evaluateFixedWindow: Evaluate = (state, now, params, cost, elsewhere = []) => {
  const { limit } = params;
  const nowFrame = windowFrame(now, params);
  const [window, local, localNext] = rollForward(state, now, nowFrame);
  // The state was counted in a window after now's (the store's clock went back): its counts stay there, and the request is decided in that window.
  const frame = window === nowFrame.index ? nowFrame : windowFrame(params.calendar === undefined ? window * params.windowMs : window, params);
  const [otherCurrent, otherNext] = countedElsewhere(elsewhere, now, frame);
  const current = local + otherCurrent;
  const next = localNext + otherNext;
  const { endMs: windowEnd, nextEndMs: nextWindowEnd } = frame;
  const usage = (curr: number, queued: number): Usage => ({
    remaining: Math.max(0, limit - curr - queued),
    resetAtMs: queued > 0 ? nextWindowEnd : curr > 0 ? windowEnd : now,
  });
  const currentUsage = usage(current, next);
  if (cost > limit) return beyondCapacity(state, currentUsage, params);

  if (current + cost <= limit) {
    return admitted([window, local + cost, localNext, frame.length], 0, usage(current + cost, next), currentUsage);
  }
  const throttle = params.action === "THROTTLE";
  if (throttle && next + cost <= limit) {
    return admitted([window, local, localNext + cost, frame.length], windowEnd - now, usage(current, next + cost), currentUsage);
  }
  // At the next window `next` becomes the count; under THROTTLE a request can always queue then.
  const waitForNext = !(throttle || next + cost <= limit);
  return refused(state, (waitForNext ? nextWindowEnd : windowEnd) - now, currentUsage);
};

/** The state aged to `now` in the frame's window; one counted under another window or calendar carries its counts over. */
function rollForward(state: CounterState | undefined, now: number, frame: WindowFrame): [number, number, number] {
  if (state === undefined || state.length < 4) return [frame.index, 0, 0];
  const [stored, current, next, storedLength] = state as [number, number, number, number];
  if (storedLength === frame.length) return age(stored, current, next, frame.index, frame.previous);
  if (storedLength < 0) return [frame.index, current + next, 0];
  const storedWindow = Math.floor(now / storedLength);
  const [, curr, queued] = age(stored, current, next, storedWindow, storedWindow - 1);
  return [frame.index, curr + queued, 0];
}

/**
 * What other regions count in this window and the next: each state aged to
 * now; a region whose clock has moved on to the next window counts its
 * current window in our next.
 */
function countedElsewhere(elsewhere: readonly CounterState[], now: number, frame: WindowFrame): [number, number] {
  let current = 0;
  let next = 0;
  for (const state of elsewhere) {
    const [theirs, curr, queued] = rollForward(state, now, frame);
    if (theirs === frame.index) {
      current += curr;
      next += queued;
    } else if (theirs === frame.next) {
      next += curr;
    }
  }
  return [current, next];
}

function age(stored: number, current: number, next: number, window: number, previous: number): [number, number, number] {
  if (stored >= window) return [stored, current, next];
  if (stored === previous) return [window, next, 0];
  return [window, 0, 0];
}

export const fixedWindowHorizonMs = (windowMs: number): number => 2 * windowMs;
