/**
 * lua/decide.lua and lua/reset.lua on real Redis: the exact keys, fields, TTLs
 * and replies, so a change to the layout is a deliberate one.
 */

import type { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { calendarBoundaries, calendarMarker, LONGEST_PERIOD_MS } from "../../src/domain/calendar.js";
import type { BucketRef, CounterCall } from "../../src/domain/ports.js";
import { ALGORITHMS } from "../../src/domain/rule.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { CHECKS_PER_CALL, RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { MODE, type Mode } from "../../src/store/redis/script-codes.js";
import { decideArgs, decisionNumbers, registerScripts, type ScriptArgs, type ScriptedRedis, type ScriptReply } from "../../src/store/redis/scripts.js";
import { ManualClock } from "../support/clock.js";
import { deleteByPrefix } from "../harness/delete-by-prefix.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
/** A fixed window of a minute keeps its buckets for two windows: pages change every two minutes. */
const FIXED_WINDOW_HORIZON = 2 * 60_000;

/** A page's fields, each state as decide.lua's receipts write it: its numbers joined by ":". */
async function pageFields(redis: Redis, key: string): Promise<Record<string, string>> {
  const fields: Record<string, string> = {};
  for (const [field, value] of Object.entries(await redis.hgetallBuffer(key))) fields[field] = stateText(value);
  return fields;
}

/** A stored state: big-endian doubles (see decide.lua's "States"). */
function stateText(value: Buffer): string {
  const numbers: number[] = [];
  for (let at = 0; at + 8 <= value.length; at += 8) numbers.push(value.readDoubleBE(at));
  return numbers.join(":");
}

/** A reply as numbers and text: a decision's packed numbers, or a reservation's or release's array with its receipts as text. */
function readable(reply: ScriptReply): (number | string)[] {
  return Array.isArray(reply) ? reply.map((value) => (Buffer.isBuffer(value) ? value.toString("utf8") : value)) : decisionNumbers(reply);
}

describe.runIf(await redisAvailable())("decide.lua", () => {
  let redis: Redis;
  let scripted: ScriptedRedis;
  let prefix: string;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  let store: RedisCounterStore;
  // One page per rule, so every bucket's keys are known in advance.
  let layout: KeyLayout;

  beforeAll(() => {
    ({ redis, prefix, cleanup } = testRedis());
    scripted = registerScripts(redis);
    layout = new KeyLayout(prefix, 1);
  });
  afterAll(() => cleanup());
  beforeEach(async () => {
    await deleteByPrefix(redis, prefix);
    clock = new ManualClock(T0);
    store = new RedisCounterStore(redis, { layout, clock });
  });

  const fixedWindow: BucketRef = {
    ruleId: "r1",
    key: "user:u1",
    params: { algorithm: "FIXED_WINDOW", limit: 2, windowMs: 60_000, capacity: 2, action: "REJECT" },
  };
  const check = (buckets: BucketRef[], cost = 1, dryRun = false) => store.decide([{ buckets, cost, dryRun }]).then((r) => r[0]!);

  /** The page a bucket of rule r1 is written to at `at`: a in even epochs, b in odd ones. */
  const pageAt = (at: number, horizon = FIXED_WINDOW_HORIZON) => `${prefix}{r1:0}:${Math.floor(at / horizon) % 2 === 0 ? "a" : "b"}`;
  const otherPageAt = (at: number, horizon = FIXED_WINDOW_HORIZON) => `${prefix}{r1:0}:${Math.floor(at / horizon) % 2 === 0 ? "b" : "a"}`;
  /** How long a page written at `at` lives: until the start of the second epoch after. */
  const ttlAt = (at: number, horizon = FIXED_WINDOW_HORIZON) => (Math.floor(at / horizon) + 2) * horizon - at;

  it("replies one string of doubles: now, allowed, then remaining, reset and outcome per rule", async () => {
    const window = Math.floor(T0 / 60_000);
    const reply = await scripted.floodgateDecide(2, `${prefix}{r1:0}:a`, `${prefix}{r1:0}:b`, `1:${MODE.DECIDE}:${T0}`, "3:2:60000:2:1", "user:u1");
    expect(Buffer.isBuffer(reply)).toBe(true);
    // The outcome: -1 - the delay for a conforming rule, the wait before a retry for a refusing one.
    expect(readable(reply)).toEqual([T0, 1, 1, (window + 1) * 60_000, -1]);
    const refused = await scripted.floodgateDecide(2, `${prefix}{r1:0}:a`, `${prefix}{r1:0}:b`, `2:${MODE.DECIDE}:${T0}`, "3:2:60000:2:1", "user:u1");
    expect(readable(refused)).toEqual([T0, 0, 1, (window + 1) * 60_000, (window + 1) * 60_000 - T0]);
  });

  it("replies only its own call's values after a call of more rules, the records and the reply being kept from call to call", async () => {
    const window = Math.floor(T0 / 60_000);
    const pages = (rule: string) => [`${prefix}{${rule}:0}:a`, `${prefix}{${rule}:0}:b`];
    // Three rules, the first refusing (cost 2 over a limit of 1), a reservation with its receipts, then one rule alone.
    const three = readable(
      await scripted.floodgateDecide(6, ...pages("r1"), ...pages("r2"), ...pages("r3"), `2:${MODE.RESERVE}:${T0}`, "3:1:60000:1:1", "user:u1", "2:5:60000:5:2", "user:u1", "1:5:60000:5:1", "user:u1"),
    );
    expect(three).toHaveLength(2 + 3 * 8);
    expect(three.slice(0, 3)).toEqual([T0, 0, 0]);
    const decided = readable(
      await scripted.floodgateDecide(6, ...pages("r6"), ...pages("r7"), ...pages("r8"), `1:${MODE.DECIDE}:${T0}`, "3:2:60000:2:1", "user:u1", "3:2:60000:2:1", "user:u1", "3:2:60000:2:1", "user:u1"),
    );
    expect(decided).toHaveLength(2 + 3 * 3);
    const one = await scripted.floodgateDecide(2, ...pages("r4"), `1:${MODE.DECIDE}:${T0}`, "3:2:60000:2:1", "user:u1");
    expect(readable(one)).toEqual([T0, 1, 1, (window + 1) * 60_000, -1]);
    const reserved = await scripted.floodgateDecide(2, ...pages("r5"), `1:${MODE.RESERVE}:${T0}`, "3:2:60000:2:1", "user:u1");
    expect(readable(reserved)).toEqual([T0, 1, 1, 1, (window + 1) * 60_000, -1, 0, 2, T0, `${window}:1:0:60000//2`]);
  });

  describe("decide_each", () => {
    const pages = (rule: string) => [`${prefix}{${rule}:0}:a`, `${prefix}{${rule}:0}:b`];
    const log = (rule: string) => `${prefix}{${rule}:0}:log`;
    /** Calls of rules named after `run` (each run its own buckets): three rules, two rules with a log, one rule, and the first again over its limit. */
    const calls = (run: string, head = (cost: number) => `${cost}:${MODE.DECIDE}:${T0}`): ScriptArgs[] => [
      [6, ...pages(`${run}1`), ...pages(`${run}2`), ...pages(`${run}3`), head(1), "3:2:60000:2:1", "user:u1", "2:5:60000:5:2", "user:u1", "1:3:60000:3:1", "user:u1"],
      [3, ...pages(`${run}4`), log(`${run}5`), head(2), "5:4:60000:6:1", "user:u1", "4:2:60000:2:1", "user:u1"],
      [2, ...pages(`${run}1`), head(1), "3:2:60000:2:1", "user:u1"],
      [2, ...pages(`${run}1`), head(1), "3:2:60000:2:1", "user:u1"],
    ];

    it("replies, in order, what decide replies to each call made in turn", async () => {
      const together = await scripted.floodgateDecideEach(calls("e"));
      const alone: ScriptReply[] = [];
      for (const call of calls("s")) alone.push(await scripted.floodgateDecide(...call));
      expect(together.map((reply) => readable(reply as Buffer))).toEqual(alone.map(readable));
      // The third call took the first rule's last unit; the fourth was refused.
      expect(together.map((reply) => readable(reply as Buffer)[1])).toEqual([1, 1, 1, 0]);
    });

    it("fails a call alone, its error in its place, and decides the others", async () => {
      await redis.set(log("x5"), "not a list");
      const replies = await scripted.floodgateDecideEach(calls("x"));
      expect(replies[1]).toBeInstanceOf(Error);
      expect((replies[1] as Error).message).toMatch(/WRONGTYPE/);
      expect([0, 2, 3].map((i) => readable(replies[i] as Buffer)[1])).toEqual([1, 1, 0]);
      const broken: BucketRef = { ruleId: "x6", key: "user:u1", params: { algorithm: "SLIDING_WINDOW_LOG", limit: 2, windowMs: 60_000, capacity: 2, action: "REJECT" } };
      await redis.set(layout.scriptKeys(broken, layout.field(broken.key))[0]!, "not a list");
      const storeCalls = [fixedWindow, broken, fixedWindow].map((bucket) => ({ buckets: [bucket], cost: 1, dryRun: false }));
      const [first, second, third] = (await store.decideEach(storeCalls, 1_000)).results;
      expect([first, third]).toMatchObject([{ allowed: true }, { allowed: true }]);
      expect(second).toHaveProperty("error");
    });

    it("goes in calls of at most CHECKS_PER_CALL checks, which Redis decides in the batch's order", async () => {
      const sizes: number[] = [];
      const decideEach = scripted.floodgateDecideEach;
      scripted.floodgateDecideEach = (commands) => {
        sizes.push(commands.length);
        return decideEach(commands);
      };
      try {
        const bucket: BucketRef = { ...fixedWindow, key: "user:many", params: { ...fixedWindow.params, limit: 100, capacity: 100 } };
        const calls = Array.from({ length: 2 * CHECKS_PER_CALL + 22 }, () => ({ buckets: [bucket], cost: 1, dryRun: false }));
        const replies = await store.decide(calls);
        expect(sizes).toEqual([CHECKS_PER_CALL, CHECKS_PER_CALL, 22]);
        expect(replies.map((r) => r.allowed)).toEqual(calls.map((_, i) => i < 100));
        expect(replies.slice(0, 100).map((r) => r.outcomes[0]!.remaining)).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
      } finally {
        scripted.floodgateDecideEach = decideEach;
      }
    });

    it("reads Redis TIME once for the calls that do not pin the clock, and refuses a reservation", async () => {
      const [a, b, c] = await scripted.floodgateDecideEach([
        ...calls("t", (cost) => `${cost}:${MODE.DECIDE}`).slice(0, 2),
        [2, ...pages("t9"), `1:${MODE.RESERVE}:${T0}`, "3:2:60000:2:1", "user:u1"],
      ]);
      expect(readable(a as Buffer)[0]).toBe(readable(b as Buffer)[0]);
      expect(Math.abs(readable(a as Buffer)[0] as number) - Date.now()).toBeLessThan(60_000);
      expect(c).toBeInstanceOf(Error);
      expect((c as Error).message).toMatch(/decisions and dry runs only/);
      expect(await redis.exists(...pages("t9"))).toBe(0);
    });
  });

  it("stores a bucket as one field of its epoch's page, its state as doubles, the page expiring when it is current again", async () => {
    await check([fixedWindow]);
    const page = pageAt(T0);
    expect(await redis.keys(`${prefix}*`)).toEqual([page]);
    expect(await pageFields(redis, page)).toEqual({ "user:u1": `${Math.floor(T0 / 60_000)}:1:0:60000` });
    expect((await redis.hgetBuffer(page, "user:u1"))!.length).toBe(32);
    expect(await redis.pttl(page)).toBeGreaterThan(ttlAt(T0) - 1_000);
    expect(await redis.pttl(page)).toBeLessThanOrEqual(ttlAt(T0));
    expect(await redis.object("ENCODING", page)).toBe("listpack");
  });

  it("sets a page's TTL on a bucket's first write in the epoch only, and never shortens it", async () => {
    await check([fixedWindow]);
    const page = pageAt(T0);
    await redis.pexpire(page, 10 * 60 * 60_000); // as a rule with a longer horizon would have left it
    await check([{ ...fixedWindow, key: "user:u2" }]);
    expect(await redis.pttl(page)).toBeGreaterThan(9 * 60 * 60_000);
    await redis.pexpire(page, 1_000);
    await check([fixedWindow]); // not the bucket's first write in this page: the TTL stays
    expect(await redis.pttl(page)).toBeLessThanOrEqual(1_000);
    await check([{ ...fixedWindow, key: "user:u3" }]); // a first write: lengthened to the epoch's
    expect(await redis.pttl(page)).toBeGreaterThan(ttlAt(T0) - 1_000);
  });

  it("writes nothing for a refused request or a dry run", async () => {
    await check([fixedWindow], 1, true);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    await check([fixedWindow], 3);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });

  it("moves a bucket to the other page when a new epoch begins, reading it from the page it was in", async () => {
    // A token bucket of 10 a minute: its horizon is two minutes, and its state outlives an epoch's end.
    const meter: BucketRef = { ruleId: "r1", key: "user:u1", params: { algorithm: "TOKEN_BUCKET", limit: 10, windowMs: 60_000, capacity: 10, action: "REJECT" } };
    const horizon = 2 * 60_000;
    const beforeEnd = (Math.floor(T0 / horizon) + 1) * horizon - 1;
    clock.set(beforeEnd);
    await check([meter], 5);
    await check([{ ...meter, key: "user:idle" }]);
    const [first, second] = [pageAt(beforeEnd, horizon), otherPageAt(beforeEnd, horizon)];
    clock.set(beforeEnd + 2);
    expect(pageAt(clock.now(), horizon)).toBe(second);
    // Read from the page of the epoch before: 5 taken 2 ms ago, 1 more now, nothing refilled yet.
    expect((await check([meter])).outcomes[0]!.remaining).toBe(4);
    expect(Object.keys(await pageFields(redis, first))).toEqual(["user:idle"]);
    expect(Object.keys(await pageFields(redis, second))).toEqual(["user:u1"]);
    expect(await redis.pttl(second)).toBeLessThanOrEqual(ttlAt(clock.now(), horizon));
  });

  it("reads a state an earlier version wrote as decimal text, so counters carry over an upgrade", async () => {
    const window = Math.floor(T0 / 60_000);
    await redis.hset(otherPageAt(T0), "user:u1", `${window}:1:0:60000`, "_o", String(T0), "_u", String(T0 + 4 * 60_000));
    const reply = await check([fixedWindow]);
    expect(reply.outcomes[0]!.remaining).toBe(0);
    expect(await pageFields(redis, pageAt(T0))).toEqual({ "user:u1": `${window}:2:0:60000` });
    expect(await redis.hexists(otherPageAt(T0), "user:u1")).toBe(0);
    expect((await check([fixedWindow])).allowed).toBe(false);
  });

  it("reads a sliding window counter's state written as decimal text of 40 characters, the length its doubles take, as text", async () => {
    const window = Math.floor(T0 / 60_000);
    const counter: BucketRef = { ruleId: "r2", key: "user:u1", params: { algorithm: "SLIDING_WINDOW_COUNTER", limit: 200_000_000_000, windowMs: 60_000, capacity: 200_000_000_000, action: "REJECT" } };
    // window:previous:current:next:window_ms
    const state = `${window}:0:100000000000:1000000000:60000`;
    expect(state).toHaveLength(40);
    await redis.hset(`${prefix}{r2:0}:${Math.floor(T0 / (3 * 60_000)) % 2 === 0 ? "a" : "b"}`, "user:u1", state);
    // A dry run answers as if admitted: its own unit counted too.
    expect((await check([counter], 1, true)).outcomes[0]!.remaining).toBe(200_000_000_000 - 100_000_000_000 - 1_000_000_000 - 1);
  });

  it("keeps a SLIDING_WINDOW_LOG bucket as a list of release times that expires a window after the last", async () => {
    const log: BucketRef = {
      ruleId: "r2",
      key: "ip:10.0.0.1",
      params: { algorithm: "SLIDING_WINDOW_LOG", limit: 5, windowMs: 10_000, capacity: 5, action: "REJECT" },
    };
    await check([log], 2);
    clock.advance(1_500);
    await check([log]);
    const key = `${prefix}{r2:0}:l:ip:10.0.0.1`;
    expect(await redis.lrange(key, 0, -1)).toEqual([String(T0), String(T0), String(T0 + 1_500)]);
    expect(await redis.pttl(key)).toBeGreaterThan(9_000);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(10_000);
    clock.advance(9_000); // the first two have left the window
    await check([log], 1, true);
    expect(await redis.llen(key)).toBe(3); // a dry run changes nothing
    await check([log]);
    expect(await redis.lrange(key, 0, -1)).toEqual([String(T0 + 1_500), String(T0 + 10_500)]); // trimmed by the call that appends
  });

  it("reads a SLIDING_WINDOW_LOG list holding what it never writes as empty, and the next admission trims it away", async () => {
    const log = (limit: number): BucketRef => ({ ruleId: "r2", key: "ip:10.0.0.1", params: { algorithm: "SLIDING_WINDOW_LOG", limit, windowMs: 10_000, capacity: limit, action: "REJECT" } });
    const key = `${prefix}{r2:0}:l:ip:10.0.0.1`;
    // Written by another hand, without a TTL: read as it is, it would fail every check of its bucket for good.
    await redis.rpush(key, "garbage");
    const dryRun = await check([log(5)], 1, true);
    expect(dryRun).toMatchObject({ allowed: true, outcomes: [{ remaining: 4 }] });
    expect(await redis.lrange(key, 0, -1)).toEqual(["garbage"]);
    expect((await check([log(5)])).outcomes[0]!.remaining).toBe(4);
    expect(await redis.lrange(key, 0, -1)).toEqual([String(T0)]);
    expect(await redis.pttl(key)).toBeGreaterThan(9_000);

    // Wherever the entry that cannot be read is met: as the newest, as the one a request waits
    // for to leave (the second, when two must leave), or in the search past the dead ones.
    for (const entries of [
      [String(T0 - 2_000), String(T0 - 1_000), "junk"],
      [String(T0 - 2_000), "junk", String(T0 - 500)],
      [String(T0 - 20_000), "junk", String(T0 - 500)],
    ]) {
      await redis.del(key);
      await redis.rpush(key, ...entries);
      expect(await check([log(2)])).toMatchObject({ allowed: true, outcomes: [{ remaining: 1 }] });
      expect(await redis.lrange(key, 0, -1)).toEqual([String(T0)]);
    }
  });

  it("hashes long bucket keys into a bounded field", async () => {
    const long: BucketRef = { ...fixedWindow, key: `user:${"x".repeat(300)}` };
    await check([long]);
    const fields = Object.keys(await redis.hgetall(pageAt(T0)));
    expect(fields).toHaveLength(1);
    expect(fields[0]).toMatch(/^#[A-Za-z0-9_-]{22}$/);
  });

  it("forgets a bucket with reset.lua, whatever its algorithm", async () => {
    await check([fixedWindow]);
    await check([{ ...fixedWindow, key: "user:u2" }]);
    expect(await store.reset("r1", "user:u1")).toBe(true);
    expect(await pageFields(redis, pageAt(T0))).toEqual({ "user:u2": `${Math.floor(T0 / 60_000)}:1:0:60000` });
    expect(await store.reset("r1", "user:u1")).toBe(false);
  });

  it("loads the library again after FUNCTION FLUSH without failing a check, alone or in a pipeline", async () => {
    await check([fixedWindow]);
    await redis.function("FLUSH");
    const reply = await check([fixedWindow]);
    expect(reply.allowed).toBe(true);
    expect(reply.outcomes[0]!.remaining).toBe(0);
    await redis.function("FLUSH");
    const [first, second] = await store.decide([
      { buckets: [{ ...fixedWindow, key: "user:p1" }], cost: 1, dryRun: false },
      { buckets: [{ ...fixedWindow, key: "user:p1" }], cost: 1, dryRun: false },
    ]);
    expect([first!.outcomes[0]!.remaining, second!.outcomes[0]!.remaining]).toEqual([1, 0]);
    await redis.function("FLUSH");
    expect(await store.reset("r1", "user:p1")).toBe(true);
  });

  describe("calendars", () => {
    const calendar = { period: "DAY", timeZone: "Europe/Berlin", weekStartsOn: null } as const;
    const daily: BucketRef = {
      ruleId: "r1",
      key: "user:u1",
      params: { algorithm: "FIXED_WINDOW", limit: 2, windowMs: LONGEST_PERIOD_MS.DAY, capacity: 2, action: "REJECT", calendar },
    };
    const instantNow = Date.parse("2026-03-29T21:59:00Z"); // the instance: a minute before Berlin's midnight
    const boundaries = calendarBoundaries(instantNow, calendar);
    const spec = `3:2:${LONGEST_PERIOD_MS.DAY}:2:1:C:${calendarMarker(calendar)}:${boundaries.join(",")}`;
    /** The call the instance makes at instantNow, Redis's clock pinned at `now` (the head carries it). */
    const decideAt = async (now: number) =>
      readable(
        await scripted.floodgateDecide(
          ...(decideArgs(layout, { buckets: [daily], cost: 1, dryRun: false }, [0], MODE.DECIDE, instantNow).map((arg, i) => (i === 3 ? `1:${MODE.DECIDE}:${now}` : arg)) as ScriptArgs),
        ),
      );

    it("sends the calendar's marker and six period boundaries in the spec, the instance's now in the third period", () => {
      const args = decideArgs(layout, { buckets: [daily], cost: 1, dryRun: false }, [0], MODE.DECIDE, instantNow);
      expect(args.slice(3)).toEqual([`1:${MODE.DECIDE}:${instantNow}`, spec, "user:u1"]);
      expect(boundaries[2]! <= instantNow && instantNow < boundaries[3]!).toBe(true);
    });

    it("takes the period holding Redis's now: a store clock past the boundary counts in the next day, the period's start its index", async () => {
      const midnight = boundaries[3]!;
      expect(await decideAt(midnight - 1)).toEqual([midnight - 1, 1, 1, midnight, -1]);
      // Redis's clock a few seconds ahead of the instance's: already the next day, which began at `midnight` and ends 24 hours later.
      expect(await decideAt(midnight + 5_000)).toEqual([midnight + 5_000, 1, 1, boundaries[4]!, -1]);
      const [field] = Object.values(await pageFields(redis, pageAt(midnight + 5_000, 2 * LONGEST_PERIOD_MS.DAY)));
      expect(field).toBe(`${midnight}:1:0:${calendarMarker(calendar)}`);
    });

    it("takes the period before when Redis's clock is behind the instance's across the boundary", async () => {
      expect(await decideAt(boundaries[2]! - 1)).toEqual([boundaries[2]! - 1, 1, 1, boundaries[2]!, -1]);
    });

    it("fails rather than guess when no period it was sent holds its now", async () => {
      await expect(decideAt(boundaries[4]!)).rejects.toThrow(/no calendar period of the spec holds now/);
      await expect(decideAt(boundaries[1]! - 1)).rejects.toThrow(/no calendar period of the spec holds now/);
    });
  });

  it("reads Redis TIME when no time is given", async () => {
    const live = new RedisCounterStore(redis, { layout });
    const before = Date.now();
    const [reply] = await live.decide([{ buckets: [{ ...fixedWindow, ruleId: "live" }], cost: 1, dryRun: true }]);
    expect(Math.abs(reply!.nowMs - before)).toBeLessThan(2_000);
  });

  describe("reserve and release (a request whose rules span Redis Cluster slots)", () => {
    const window = Math.floor(T0 / 60_000);
    const run = async (call: CounterCall, mode: Mode, ...receipts: string[]) =>
      readable(await scripted.floodgateDecide(...([...decideArgs(layout, call, call.buckets.map((_, i) => i), mode, clock.now()), ...receipts] as ScriptArgs)));
    const one = (bucket: BucketRef, cost = 1): CounterCall => ({ buckets: [bucket], cost, dryRun: false });
    const receiptOf = async (call: CounterCall) => String((await run(call, MODE.RESERVE)).at(-1));

    it("reserve replies each rule's verdict as admitted and as it stands, then a receipt of what it took", async () => {
      const reply = await run(one(fixedWindow), MODE.RESERVE);
      const written = `${window}:1:0:60000`;
      // conforming, remaining and reset if admitted, retry, delay, remaining and reset as it stands; receipt: written/previous/counted at
      expect(reply).toEqual([T0, 1, 1, 1, (window + 1) * 60_000, -1, 0, 2, T0, `${written}//2`]);
      expect((await pageFields(redis, pageAt(T0)))["user:u1"]).toBe(written);
    });

    it("reserve as a dry run takes nothing and gives no receipt", async () => {
      expect(await run(one(fixedWindow), MODE.RESERVE | MODE.DRY_RUN)).toEqual([T0, 1, 1, 1, (window + 1) * 60_000, -1, 0, 2, T0, ""]);
      expect(await redis.keys(`${prefix}*`)).toEqual([]);
    });

    it("a refusing slot takes nothing, and its receipts are empty", async () => {
      const reply = await run(one(fixedWindow, 3), MODE.RESERVE);
      expect(reply.slice(0, 3)).toEqual([T0, 0, 0]);
      expect(reply.at(-1)).toBe("");
      expect(await redis.keys(`${prefix}*`)).toEqual([]);
    });

    it("release puts the bucket back exactly when nothing else wrote it", async () => {
      await check([fixedWindow]);
      const page = pageAt(T0);
      const before = await redis.hgetallBuffer(page);
      const receipt = await receiptOf(one(fixedWindow));
      expect(await run(one(fixedWindow), MODE.RELEASE, receipt)).toEqual([T0, 2]);
      expect(await redis.hgetallBuffer(page)).toEqual(before);

      const fresh: BucketRef = { ...fixedWindow, key: "user:fresh" };
      expect(await run(one(fresh), MODE.RELEASE, await receiptOf(one(fresh)))).toEqual([T0, 2]);
      expect(await redis.hexists(page, "user:fresh")).toBe(0);
    });

    /**
     * Bucket x: one unit at T0, a reservation of 2 at `reserveAt`, another
     * unit on top at `otherAt`, the reservation released at `releaseAt`.
     * Bucket y: the same without the reservation. Returns both buckets and
     * the release's reply.
     */
    async function releasedUnderOthers(algorithm: (typeof ALGORITHMS)[number], at: { reserveAt: number; otherAt: number; releaseAt: number }) {
      const params: LimitParams = { algorithm, limit: 10, windowMs: 60_000, capacity: 10, action: "REJECT" };
      const x: BucketRef = { ruleId: "x", key: "user:u1", params };
      const y: BucketRef = { ruleId: "y", key: "user:u1", params };
      await check([x]);
      await check([y]);
      clock.set(T0 + at.reserveAt);
      const receipt = await receiptOf(one(x, 2));
      clock.set(T0 + at.otherAt);
      await check([x]);
      await check([y]);
      clock.set(T0 + at.releaseAt);
      return { x, y, released: await run(one(x, 2), MODE.RELEASE, receipt) };
    }

    // After the release, x and y must decide alike at any time.
    const cases: { algorithm: (typeof ALGORITHMS)[number]; reserveAt: number; otherAt: number; releaseAt: number; given: number }[] = [
      // CONCURRENCY takes a lease, not units: its release is tested below ("CONCURRENCY").
      ...ALGORITHMS.filter((algorithm) => algorithm !== "CONCURRENCY").map((algorithm) => ({ algorithm, reserveAt: 1_000, otherAt: 2_000, releaseAt: 3_000, given: algorithm === "SLIDING_WINDOW_LOG" ? 2 : 1 })),
      // The counts moved from current to previous at the window boundary.
      { algorithm: "SLIDING_WINDOW_COUNTER", reserveAt: 1_000, otherAt: 61_000, releaseAt: 62_000, given: 1 },
      // A fixed window forgets the previous window: nothing is left to give back.
      { algorithm: "FIXED_WINDOW", reserveAt: 1_000, otherAt: 61_000, releaseAt: 62_000, given: 0 },
    ];
    for (const { algorithm, reserveAt, otherAt, releaseAt, given } of cases) {
      it(`${algorithm}: release gives back exactly what it took when another request counted on top (${reserveAt}, ${otherAt}, ${releaseAt} ms)`, async () => {
        const { x, y, released } = await releasedUnderOthers(algorithm, { reserveAt, otherAt, releaseAt });
        expect(released).toEqual([T0 + releaseAt, given]);
        for (const later of [0, 5_000, 59_000, 61_000, 130_000]) {
          clock.set(T0 + releaseAt + later);
          expect(await check([x], 1, true), `${later} ms after the release`).toEqual(await check([y], 1, true));
        }
      });
    }

    it("puts back the log entries a reservation dropped from the window, which a longer window would count again", async () => {
      const log: BucketRef = { ruleId: "r2", key: "ip:10.0.0.1", params: { algorithm: "SLIDING_WINDOW_LOG", limit: 3, windowMs: 10_000, capacity: 3, action: "REJECT" } };
      const key = `${prefix}{r2:0}:l:ip:10.0.0.1`;
      await check([log], 2);
      clock.advance(10_000); // both entries have left the window
      const receipt = await receiptOf(one(log));
      expect(receipt).toBe(`${T0 + 10_000}/${T0}*2`);
      expect(await redis.lrange(key, 0, -1)).toEqual([String(T0 + 10_000)]);
      expect(await run(one(log), MODE.RELEASE, receipt)).toEqual([T0 + 10_000, 2]);
      expect(await redis.lrange(key, 0, -1)).toEqual([String(T0), String(T0)]);
      const longer: BucketRef = { ...log, params: { ...log.params, windowMs: 60_000 } };
      expect((await check([longer], 1, true)).outcomes[0]!.remaining).toBe(0);
    });

    it("gives a meter back less than it took, never more, when its debt drained away under the reservation", async () => {
      // Without the reservation the debt would have drained to nothing at +6 s;
      // with it, it never did, so the drain from +6 s to +7 s cannot be told apart.
      const { x, y, released } = await releasedUnderOthers("TOKEN_BUCKET", { reserveAt: 1_000, otherAt: 7_000, releaseAt: 8_000 });
      expect(released).toEqual([T0 + 8_000, 1]);
      const [withReservation, without] = [(await check([x], 1, true)).outcomes[0]!, (await check([y], 1, true)).outcomes[0]!];
      expect(withReservation.resetAtMs - without.resetAtMs).toBe(1_000); // one sixth of a token still counted, for one second
      expect(withReservation.remaining).toBe(without.remaining);
    });

    it("gives nothing back when the rule's window changed and other requests counted since", async () => {
      const receipt = await receiptOf(one(fixedWindow));
      const changed: BucketRef = { ...fixedWindow, params: { ...fixedWindow.params, windowMs: 30_000 } };
      await check([changed]);
      expect(await run(one(changed), MODE.RELEASE, receipt)).toEqual([T0, 0]);
      expect((await check([changed], 1, true)).outcomes[0]!.remaining).toBe(0);
    });
  });

  describe("CONCURRENCY", () => {
    const leases: BucketRef = { ruleId: "r3", key: "user:u1", params: { algorithm: "CONCURRENCY", limit: 2, windowMs: 30_000, capacity: 2, action: "REJECT" } };
    let key: string;
    beforeEach(() => {
      key = `${prefix}{r3:0}:c:user:u1`;
    });
    const hold = (lease: string, buckets: BucketRef[] = [leases], dryRun = false) => store.decide([{ buckets, cost: 1, dryRun, lease }]).then((r) => r[0]!);
    const run = async (call: CounterCall, mode: Mode, ...receipts: string[]) =>
      readable(await scripted.floodgateDecide(...([...decideArgs(layout, call, call.buckets.map((_, i) => i), mode, clock.now()), ...receipts] as ScriptArgs)));

    it("keeps a bucket's leases as a sorted set scored by expiry, in the hash-tag slot of the rule's page, expiring with the window", async () => {
      const reply = await scripted.floodgateDecide(1, key, `5:${MODE.DECIDE}:${T0}`, "6:2:30000:2:1", "lease-a");
      // One slot whatever the cost: remaining 1; resetAt, when a slot more frees itself, is this lease's expiry.
      expect(readable(reply)).toEqual([T0, 1, 1, T0 + 30_000, -1]);
      expect(await redis.keys(`${prefix}*`)).toEqual([key]);
      expect(await redis.zrange(key, 0, -1, "WITHSCORES")).toEqual(["lease-a", String(T0 + 30_000)]);
      expect(await redis.pttl(key)).toBeGreaterThan(29_000);
      expect(await redis.pttl(key)).toBeLessThanOrEqual(30_000);
      expect(layout.slotOf("r3", "user:u1")).toBe(layout.slotOf("r3", layout.field("user:u1")));
    });

    it("admits limit checks at once, refuses the next until a lease is released or expires, and says when a slot frees itself", async () => {
      expect((await hold("a")).allowed).toBe(true);
      clock.advance(1_000);
      const second = await hold("b");
      expect(second.outcomes[0]).toEqual({ conforming: true, remaining: 0, resetAtMs: T0 + 30_000, retryAfterMs: null, delayMs: 0 });
      clock.advance(1_000);
      const refused = await hold("c");
      expect(refused.allowed).toBe(false);
      expect(refused.outcomes[0]).toEqual({ conforming: false, remaining: 0, resetAtMs: T0 + 30_000, retryAfterMs: 28_000, delayMs: 0 });
      expect(await redis.zcard(key)).toBe(2);
      expect(await store.releaseLease("a", [leases])).toBe(true);
      expect(await store.releaseLease("a", [leases])).toBe(false);
      expect((await hold("c")).allowed).toBe(true);
      clock.set(T0 + 31_000); // b expired
      expect((await hold("d")).outcomes[0]!.remaining).toBe(0);
      expect(await redis.zrange(key, 0, -1)).toEqual(["c", "d"]);
      expect(await store.releaseLease("b", [leases])).toBe(false);
    });

    it("takes no lease for a dry run or a check another rule refuses", async () => {
      await hold("a", [leases], true);
      const full: BucketRef = { ...fixedWindow, params: { ...fixedWindow.params, limit: 1, capacity: 1 } };
      await check([full]);
      expect((await hold("b", [leases, full])).allowed).toBe(false);
      expect(await redis.exists(key)).toBe(0);
    });

    it("reserve takes the lease and says so in its receipt; release removes exactly it", async () => {
      const call: CounterCall = { buckets: [leases], cost: 1, dryRun: false, lease: "a" };
      await hold("other");
      const reply = await run(call, MODE.RESERVE);
      expect(reply).toEqual([T0, 1, 1, 0, T0 + 30_000, -1, 0, 1, T0 + 30_000, "a"]);
      expect(await run(call, MODE.RELEASE, "a")).toEqual([T0, 2]);
      expect(await redis.zrange(key, 0, -1)).toEqual(["other"]);
      expect(await run(call, MODE.RELEASE, "a")).toEqual([T0, 0]);
    });

    it("forgets the leases with reset.lua", async () => {
      await hold("a");
      expect(await store.reset("r3", "user:u1")).toBe(true);
      expect(await redis.exists(key)).toBe(0);
    });
  });
});
