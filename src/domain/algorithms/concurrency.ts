/**
 * CONCURRENCY: at most `limit` requests in flight per bucket (Stripe's
 * concurrent-requests limiter). An admitted check holds a lease, one slot of
 * the bucket, until its holder releases it (releaseLease) or, should the
 * holder die first, until the lease's TTL, the rule's window, has passed: a
 * crashed backend never keeps capacity for longer than one window.
 *
 * The state is the expiry time of every lease the bucket holds, soonest
 * first; a lease counts while its expiry is after now. Which lease is which
 * is the store's business (a Redis sorted set by lease id, or the memory
 * store's map): a release removes one lease, and time removes the rest.
 *
 * A check takes one slot whatever its cost: a slot is a request in flight,
 * not units of work. It conforms while fewer than `limit` leases are live.
 * Refused, it is told to retry when enough leases have expired for it to
 * conform, which is no later than that (a release frees a slot sooner).
 * remaining is the slots left; resetAt is when one slot more frees itself
 * at the latest: the soonest lease's expiry (for a full bucket, the same
 * time as the retry), or now when no lease is held.
 */

import { admitted, refused, type CounterState, type Evaluate, type Usage } from "./types.js";

export const evaluateConcurrency: Evaluate = (state, now, params) => {
  const { limit, windowMs } = params;
  const held = live(state ?? [], now);
  const usage = (leases: readonly number[]): Usage => ({
    remaining: Math.max(0, limit - leases.length),
    resetAtMs: leases.length === 0 ? now : slotFreesAt(leases, limit),
  });
  const current = usage(held);
  if (held.length >= limit) return refused(held, slotFreesAt(held, limit) - now, current);
  const next = withLease(held, now + windowMs);
  return admitted(next, 0, usage(next), current);
};

/** The leases that still hold a slot at `now`, soonest expiry first. */
function live(leases: readonly number[], now: number): readonly number[] {
  return leases.filter((expiresAt) => expiresAt > now).sort((a, b) => a - b);
}

/**
 * When one slot more is free by expiries alone: the soonest lease's expiry,
 * or for a full bucket when so many have expired that one slot is (it may
 * hold more than `limit` after its limit was lowered).
 */
function slotFreesAt(leases: readonly number[], limit: number): number {
  return leases[Math.max(0, leases.length - limit)]!;
}

function withLease(leases: readonly number[], expiresAt: number): CounterState {
  return [...leases, expiresAt].sort((a, b) => a - b);
}

/** A bucket may be forgotten once its last lease has expired. */
export const concurrencyExpiresAt = (leases: readonly number[], nowMs: number): number => Math.max(nowMs, ...leases);
