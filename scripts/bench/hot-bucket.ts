/**
 * The bench's hot bucket: one bucket checked at a fixed rate (open loop, the
 * checks spread over two Floodgate instances sharing one Redis), once with
 * leased budgets off and once on (LEASE_HOT_CHECKS_PER_SECOND), side by
 * side. The rule is a fixed window the traffic overruns in every window, so
 * that both exactness and what leases leave unused show:
 *   Redis calls per check   the instances' counter-store round trips (leases
 *                           included; /metrics) over the checks they decided
 *   over-admission          the most any complete window admitted beyond the limit
 *   under-admission         the most any complete window left of its limit
 *                           unadmitted while its checks were being refused
 * A check's window is the one its decidedAt falls in (the store's clock). The
 * instances give Redis a generous deadline, so that the run judges Redis's
 * decisions, not failure modes; any check decided by failure mode all the
 * same is counted apart.
 */

import { Pool } from "undici";

export interface HotBucketRun {
  label: string;
  checks: number;
  refusedOrFailed: { refused: number; failed: number };
  /** Decided by failure mode (Redis missed its deadline): left out of the windows, which judge Redis's decisions. */
  degraded: number;
  redisCallsPerCheck: number;
  /** Admitted units of each complete window, in order. */
  windows: number[];
  overAdmission: number;
  underAdmission: number;
}

export interface HotBucketOptions {
  label: string;
  /** The instances' /graphql. */
  urls: readonly string[];
  token: string;
  tenantId: string;
  ratePerSecond: number;
  seconds: number;
  limit: number;
  windowMs: number;
}

const CHECK = `query Hot($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed degraded decidedAt } }`;
/** Requests sent per tick: ticks every 10 ms keep the rate even without a timer per request. */
const TICK_MS = 10;

export async function driveHotBucket(options: HotBucketOptions): Promise<HotBucketRun> {
  const pools = options.urls.map((url) => ({ url: new URL(url), pool: new Pool(new URL(url).origin, { connections: 16, pipelining: 1 }) }));
  const headers = { "content-type": "application/json", authorization: `Bearer ${options.token}` };
  const body = JSON.stringify({ query: CHECK, variables: { r: { tenantId: options.tenantId, resource: "/hot", method: "GET" } } });
  const callsBefore = await storeCalls(options.urls, options.token);
  const admittedByWindow = new Map<number, number>();
  const refusedByWindow = new Map<number, number>();
  let failed = 0;
  let degraded = 0;
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  const startedAt = performance.now();
  const endAt = startedAt + options.seconds * 1000;
  const send = (i: number) => {
    const { url, pool } = pools[i % pools.length]!;
    const request = pool
      .request({ path: url.pathname, method: "POST", headers, body })
      .then(async (response) => {
        const answer = (await response.body.json()) as { data?: { checkLimits?: { allowed: boolean; degraded: boolean; decidedAt: string } } };
        const decision = answer.data?.checkLimits;
        if (response.statusCode !== 200 || decision === undefined) return void failed++;
        if (decision.degraded) return void degraded++;
        const window = Math.floor(Date.parse(decision.decidedAt) / options.windowMs);
        const counts = decision.allowed ? admittedByWindow : refusedByWindow;
        counts.set(window, (counts.get(window) ?? 0) + 1);
      })
      .catch(() => void failed++)
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  while (performance.now() < endAt) {
    const due = Math.floor(((performance.now() - startedAt) / 1000) * options.ratePerSecond);
    while (sent < due) send(sent++);
    await new Promise((resolve) => setTimeout(resolve, TICK_MS));
  }
  await Promise.all([...inFlight]);
  const calls = (await storeCalls(options.urls, options.token)) - callsBefore;
  await Promise.all(pools.map(({ pool }) => pool.close()));

  // The first and last windows the run touched are partial.
  const touched = [...new Set([...admittedByWindow.keys(), ...refusedByWindow.keys()])].sort((a, b) => a - b);
  const complete = touched.slice(1, -1);
  const windows = complete.map((w) => admittedByWindow.get(w) ?? 0);
  const overrun = complete.filter((w) => (refusedByWindow.get(w) ?? 0) > 0).map((w) => admittedByWindow.get(w) ?? 0);
  const checks = [...admittedByWindow.values(), ...refusedByWindow.values()].reduce((a, b) => a + b, 0);
  return {
    label: options.label,
    checks,
    refusedOrFailed: { refused: [...refusedByWindow.values()].reduce((a, b) => a + b, 0), failed },
    degraded,
    redisCallsPerCheck: checks === 0 ? NaN : calls / checks,
    windows,
    overAdmission: Math.max(0, ...windows.map((admitted) => admitted - options.limit)),
    underAdmission: Math.max(0, ...overrun.map((admitted) => options.limit - admitted)),
  };
}

/** Counter-store round trips the instances have made so far (floodgate_counter_store_duration_seconds_count on /metrics). */
async function storeCalls(urls: readonly string[], token: string): Promise<number> {
  let total = 0;
  for (const url of urls) {
    const text = await (await fetch(new URL("/metrics", url), { headers: { authorization: `Bearer ${token}` } })).text();
    const match = /^floodgate_counter_store_duration_seconds_count (\d+)/m.exec(text);
    if (!match) throw new Error(`no floodgate_counter_store_duration_seconds_count on ${url}'s /metrics`);
    total += Number(match[1]);
  }
  return total;
}
