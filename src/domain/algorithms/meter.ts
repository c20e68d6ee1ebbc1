/**
 * TOKEN_BUCKET and LEAKY_BUCKET are one meter seen from two sides: the state is
 * a debt that drains at `limit` per window. For a token bucket the debt is the
 * tokens taken and not yet refilled (tokens = capacity - debt); for a leaky
 * bucket it is the water in the bucket, the requests still in line.
 *
 * Exactness: the debt is kept in units of 1/window_ms of a token, so a refill
 * of `limit` tokens per window is exactly `limit` units per millisecond, and
 * every fraction of a token is kept, never rounded away. Rule validation keeps
 * (capacity + limit) * window_ms below 2^52, so the integers stay exact.
 *
 * The two differ under THROTTLE:
 *   TOKEN_BUCKET  a request short of tokens borrows up to one window of refill
 *                 and waits until its tokens exist.
 *   LEAKY_BUCKET  every request joins the line and waits for the ones ahead of
 *                 it to leak out; the line holds `burst` units.
 * Under REJECT both admit a request at once while it fits the capacity (the
 * leaky bucket as a meter, like nginx's limit_req with nodelay).
 *
 * The state records when its debt will have drained under the rule it was
 * taken under, and is forgotten from then on: every store then agrees on when
 * a bucket is fresh again, whatever its TTLs, even if the rule changed since.
 */

import { divCeil, divFloor } from "./integer.js";
import { admitted, beyondCapacity, refused, type CounterState, type Evaluate, type LimitParams, type Usage } from "./types.js";

export const evaluateTokenBucket: Evaluate = (state, now, params, cost) => evaluateMeter(state, now, params, cost, "TOKEN_BUCKET");
export const evaluateLeakyBucket: Evaluate = (state, now, params, cost) => evaluateMeter(state, now, params, cost, "LEAKY_BUCKET");

function evaluateMeter(
  state: CounterState | undefined,
  now: number,
  params: LimitParams,
  cost: number,
  kind: "TOKEN_BUCKET" | "LEAKY_BUCKET",
) {
  const { limit, windowMs, capacity } = params;
  const debt = settle(state, now, params);
  const since = Math.max(now, state?.[1] ?? now);
  const full = capacity * windowMs;
  const usage = (owed: number): Usage => ({
    remaining: divFloor(Math.max(0, full - owed), windowMs),
    resetAtMs: now + divCeil(owed, limit),
  });
  const current = usage(debt);
  if (cost > capacity) return beyondCapacity(state, current, params);

  const throttle = params.action === "THROTTLE";
  const line = throttle && kind === "TOKEN_BUCKET" ? limit * windowMs : 0;
  const owed = debt + cost * windowMs;
  if (owed > full + line) return refused(state, divCeil(owed - full - line, limit), current);
  let delay = 0;
  if (throttle) delay = kind === "TOKEN_BUCKET" ? divCeil(Math.max(0, owed - full), limit) : divCeil(debt, limit);
  return admitted([owed, since, windowMs, since + divCeil(owed, limit)], delay, usage(owed), current);
}

/**
 * The debt at `now`: the stored debt minus what has drained since, at the
 * rule's current rate. A debt stored under another window length is converted
 * to this one, rounding up.
 */
function settle(state: CounterState | undefined, now: number, params: LimitParams): number {
  if (state === undefined || state.length < 4) return 0;
  const [stored, since, storedWindowMs, drainedAt] = state as [number, number, number, number];
  if (now >= drainedAt) return 0;
  const debt = storedWindowMs === params.windowMs ? stored : Math.ceil((stored / storedWindowMs) * params.windowMs);
  const elapsed = now - since;
  if (elapsed <= 0) return debt;
  return elapsed >= divCeil(debt, params.limit) ? 0 : debt - elapsed * params.limit;
}

/** When a stored debt stops mattering. */
export const meterExpiresAt = (state: CounterState): number => state[3] ?? 0;
