/**
 * A lease must end by the time the store's window it was counted in
 * ends, by the store's clock. The lease's end is turned into this instance's
 * clock with the store's offset estimated from the middle of the round trip,
 * which errs by up to half of it: when the store read its clock early in a
 * slow round trip (the reply took long to come back), the lease outlived the
 * window it was counted in, and its units were admitted in the next window on
 * top of the whole limit that window gives: over-admission.
 *
 * The store here is the real one (Redis when reachable, and the in-process
 * store), on a pinned clock; the round trip of the lease's call is made slow
 * by moving the clock on after the store decided, before the reply arrives.
 */

import type { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { BucketRef, CounterCall, CounterReply, CounterStore, DecideOptions } from "../../src/domain/ports.js";
import { LeasingCounterStore } from "../../src/store/leasing-counter-store.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { RecordingCounterStore } from "../support/recording-counter-store.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const WINDOW_MS = 1_000;
const LIMIT = 100;

/** The store, its reply held back `slowMs` of the clock when `slow` says so (the store read its clock at once, the reply came late). */
class SlowReplies extends RecordingCounterStore {
  constructor(
    inner: CounterStore,
    private readonly clock: ManualClock,
    private readonly slowMs: number,
    private readonly slow: (calls: readonly CounterCall[]) => boolean,
  ) {
    super(inner);
  }

  override async decide(calls: readonly CounterCall[], options?: DecideOptions): Promise<CounterReply[]> {
    const replies = await super.decide(calls, options);
    if (this.slow(calls)) this.clock.advance(this.slowMs);
    return replies;
  }
}

const redisReachable = await redisAvailable();
const opened: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of opened) await close();
});

function storeOf(kind: "memory" | "redis", clock: ManualClock): CounterStore {
  if (kind === "memory") return new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
  const { redis, prefix, cleanup }: { redis: Redis; prefix: string; cleanup: () => Promise<void> } = testRedis();
  opened.push(cleanup);
  return new RedisCounterStore(redis, { layout: new KeyLayout(prefix, 4), clock });
}

const KINDS: ("memory" | "redis")[] = redisReachable ? ["memory", "redis"] : ["memory"];

describe.each(KINDS)("a lease ends with the window it was counted in (%s)", (kind) => {
  it("admits no more than the limit in the window after a lease taken over a slow round trip", async () => {
    const clock = new ManualClock(T0 + 100);
    const store = storeOf(kind, clock);
    const params: LimitParams = { algorithm: "FIXED_WINDOW", limit: LIMIT, windowMs: WINDOW_MS, capacity: LIMIT, action: "REJECT" };
    const bucket: BucketRef = { ruleId: "hot", key: "tenant:acme", params };
    // The lease's call (its cost is the lease's units, more than any check's) comes back 400 ms after the store decided it.
    const slow = new SlowReplies(store, clock, 400, (calls) => calls.some((call) => call.cost > 4));
    const leasing = new LeasingCounterStore({ inner: slow, clock, hotChecksPerSecond: 5, leaseMs: 1_000 });
    const check = async (on: CounterStore, cost: number) => (await on.decide([{ buckets: [bucket], cost, dryRun: false }]))[0]!;

    // Hot: five checks of 4 in the first window, then a lease of 20 units, counted in that window.
    for (let i = 0; i < 5; i++) expect((await check(leasing, 4)).allowed).toBe(true);
    await leasing.leasesTaken();
    expect(clock.now()).toBe(T0 + 500);

    // The next window, by the store's clock (the same clock): another instance spends the whole of it.
    clock.set(T0 + WINDOW_MS + 50);
    let admitted = 0;
    for (let i = 0; i < LIMIT; i++) if ((await check(store, 1)).allowed) admitted++;
    expect(admitted).toBe(LIMIT);
    // This instance's checks in that window: the store has nothing left, and the lease was counted in the window before.
    for (let i = 0; i < 10; i++) if ((await check(leasing, 1)).allowed) admitted++;
    await leasing.leasesTaken();
    expect(admitted, "admitted in one window of a limit of 100").toBe(LIMIT);
  });
});
