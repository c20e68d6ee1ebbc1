/**
 * The exact definitions the accuracy harness judges decisions by. Each takes
 * one bucket's decisions in the order the store made them and says, for each,
 * what the definition would have decided given what was actually admitted
 * before it.
 */

export interface Observed {
  atMs: number;
  allowed: boolean;
}

export interface Judged {
  decisions: number;
  admitted: number;
  /** Admitted although the definition refuses. */
  wronglyAdmitted: number;
  /** Refused although the definition admits. */
  wronglyDenied: number;
  /** The most units admitted beyond the limit in any one window the definition checks. */
  worstOverAdmission: number;
}

export interface Rule {
  limit: number;
  windowMs: number;
  capacity: number;
}

/** Exact trailing window: at most `limit` admitted in any (t - W, t]. */
export function judgeTrailingWindow(observed: readonly Observed[], { limit, windowMs }: Rule): Judged {
  const admittedTimes: number[] = [];
  let start = 0;
  const result = empty(observed);
  for (const o of observed) {
    while (start < admittedTimes.length && admittedTimes[start]! <= o.atMs - windowMs) start++;
    const inWindow = admittedTimes.length - start;
    const fits = inWindow + 1 <= limit;
    if (o.allowed) {
      if (!fits) result.wronglyAdmitted++;
      admittedTimes.push(o.atMs);
      result.worstOverAdmission = Math.max(result.worstOverAdmission, inWindow + 1 - limit);
    } else if (fits) {
      result.wronglyDenied++;
    }
  }
  return result;
}

/** Fixed windows aligned on the epoch: at most `limit` admitted per window. */
export function judgeFixedWindow(observed: readonly Observed[], { limit, windowMs }: Rule): Judged {
  const perWindow = new Map<number, number>();
  const result = empty(observed);
  for (const o of observed) {
    const window = Math.floor(o.atMs / windowMs);
    const used = perWindow.get(window) ?? 0;
    const fits = used + 1 <= limit;
    if (o.allowed) {
      if (!fits) result.wronglyAdmitted++;
      perWindow.set(window, used + 1);
      result.worstOverAdmission = Math.max(result.worstOverAdmission, used + 1 - limit);
    } else if (fits) {
      result.wronglyDenied++;
    }
  }
  return result;
}

/**
 * A token bucket (equally a leaky bucket as a meter): capacity `capacity`,
 * refilled at `limit` per window, exact in integers of 1/window_ms token. The
 * worst window is the largest overdraft the admitted requests ran it into.
 */
export function judgeTokenBucket(observed: readonly Observed[], { limit, windowMs, capacity }: Rule): Judged {
  const full = BigInt(capacity) * BigInt(windowMs);
  const one = BigInt(windowMs);
  let debt = 0n;
  let since = observed[0]?.atMs ?? 0;
  const result = empty(observed);
  for (const o of observed) {
    const drained = BigInt(Math.max(0, o.atMs - since)) * BigInt(limit);
    debt = debt > drained ? debt - drained : 0n;
    since = Math.max(since, o.atMs);
    const fits = debt + one <= full;
    if (o.allowed) {
      if (!fits) result.wronglyAdmitted++;
      debt += one;
      if (debt > full) result.worstOverAdmission = Math.max(result.worstOverAdmission, Number((debt - full + one - 1n) / one));
    } else if (fits) {
      result.wronglyDenied++;
    }
  }
  return result;
}

function empty(observed: readonly Observed[]): Judged {
  return {
    decisions: observed.length,
    admitted: observed.filter((o) => o.allowed).length,
    wronglyAdmitted: 0,
    wronglyDenied: 0,
    worstOverAdmission: 0,
  };
}

export function sum(judged: readonly Judged[]): Judged {
  return judged.reduce(
    (total, j) => ({
      decisions: total.decisions + j.decisions,
      admitted: total.admitted + j.admitted,
      wronglyAdmitted: total.wronglyAdmitted + j.wronglyAdmitted,
      wronglyDenied: total.wronglyDenied + j.wronglyDenied,
      worstOverAdmission: Math.max(total.worstOverAdmission, j.worstOverAdmission),
    }),
    { decisions: 0, admitted: 0, wronglyAdmitted: 0, wronglyDenied: 0, worstOverAdmission: 0 },
  );
}
