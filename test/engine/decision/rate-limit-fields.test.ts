/**
 * RateLimit-Policy and RateLimit exactly as draft-ietf-httpapi-ratelimit-headers
 * (revision 12) defines them, parsed with an RFC 9651 structured-fields parser
 * (the structured-headers package), never with a pattern of our own:
 *   - the draft's own examples, through the same checks (the conforming
 *     ones pass; the two its appendix gets wrong fail, for the reason named);
 *   - every value the limiter emits, for every algorithm, on every path that
 *     decides (counter store, over-limit cache, failure mode), means what the
 *     draft says: q, w, fg-burst and pk of the rule, r and t of the bucket as
 *     read, Retry-After never earlier than a refusing rule's t, and the same
 *     RateLimit-Policy whichever path answered;
 *   - with this instance's clock seven minutes ahead of Redis's (which decides
 *     with TIME), retryAfter, resetAt, t and X-RateLimit-Reset are still right
 *     on the store path, the cache path and the degraded path.
 */

import { Redis } from "ioredis";
import { arrayBufferToBase64, parseList, type Item, type Parameters } from "structured-headers";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Decision } from "../../../src/domain/decision.js";
import type { CounterStore } from "../../../src/domain/ports.js";
import type { CheckRequest } from "../../../src/domain/request.js";
import { ALGORITHMS, windowSecondsOf, usesBurst, type Rule } from "../../../src/domain/rule.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { partitionKey } from "../../../src/engine/decision/headers.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { OverLimitCache } from "../../../src/engine/decision/over-limit-cache.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../../src/store/redis/redis-counter-store.js";
import { ResilientCounterStore } from "../../../src/store/resilient-counter-store.js";
import { freePort } from "../../harness/free-port.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";
import { CountingCounterStore } from "../../support/ports.js";
import { testRedis } from "../../support/redis.js";
import { redisAvailable } from "../../support/services.js";

// ---- the draft's definitions, checked on parsed values -----------------------------------------

const QUOTA_UNITS = ["requests", "content-bytes", "concurrent-requests"];

interface PolicyItem {
  name: string;
  q: number;
  w?: number;
  qu?: string;
  pk?: string;
  params: Parameters;
}

interface LimitItem {
  name: string;
  r: number;
  t?: number;
  pk?: string;
}

/** A non-negative Integer parameter, as the draft requires of q, r and t. */
function nonNegativeInteger(params: Parameters, name: string, required: boolean): number | undefined {
  const value = params.get(name);
  if (value === undefined) {
    if (required) throw new Error(`the "${name}" parameter is required`);
    return undefined;
  }
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw new Error(`"${name}" must be a non-negative Integer (got ${String(value)})`);
  return value;
}

/** The items of a List whose values must be Strings (the policy's name). */
function stringItems(value: string): { name: string; params: Parameters }[] {
  const list = parseList(value);
  if (list.length === 0) throw new Error("the List is empty");
  return list.map((member) => {
    if (Array.isArray(member[0])) throw new Error("a member is an Inner List, not an Item");
    const [bare, params] = member as Item;
    if (typeof bare !== "string") throw new Error(`an Item's value must be a String (got ${bare?.constructor?.name ?? typeof bare})`);
    return { name: bare, params };
  });
}

function byteSequence(params: Parameters, name: string): string | undefined {
  const value = params.get(name);
  if (value === undefined) return undefined;
  if (!(value instanceof ArrayBuffer)) throw new Error(`"${name}" must be a Byte Sequence`);
  return `:${arrayBufferToBase64(value)}:`;
}

/** RateLimit-Policy as §3 defines it: a non-empty List of String Items with q, and w, qu, pk as typed. */
function policyItems(value: string): PolicyItem[] {
  return stringItems(value).map(({ name, params }) => {
    const q = nonNegativeInteger(params, "q", true)!;
    const w = params.get("w");
    if (w !== undefined && (typeof w !== "number" || !Number.isInteger(w) || w <= 0)) throw new Error(`"w" must be a positive Integer (got ${String(w)})`);
    const qu = params.get("qu");
    if (qu !== undefined && (typeof qu !== "string" || !QUOTA_UNITS.includes(qu))) throw new Error(`"qu" must be a registered quota unit (got ${String(qu)})`);
    return { name, q, w: w as number | undefined, qu: qu as string | undefined, pk: byteSequence(params, "pk"), params };
  });
}

/** RateLimit as §4 defines it: a List of String Items with r, and t and pk as typed. */
function limitItems(value: string): LimitItem[] {
  return stringItems(value).map(({ name, params }) => ({
    name,
    r: nonNegativeInteger(params, "r", true)!,
    t: nonNegativeInteger(params, "t", false),
    pk: byteSequence(params, "pk"),
  }));
}

describe("the draft's own examples, through the same checks", () => {
  const POLICIES = [
    '"burst";q=100;w=60,"daily";q=1000;w=86400',
    '"default";q=100;w=10',
    '"permin";q=50;w=60,"perhr";q=1000;w=3600',
    '"peruser";q=100;w=60;pk=:cHsdsRa894==:',
    '"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:',
    '"basic";q=100;w=60',
    '"fixedwindow";q=100;w=60',
    '"dynamic";q=15;w=20',
    '"hour";q=1000;w=3600, "day";q=5000;w=86400',
    '"somepolicy";q=10000;w=1000',
    '"sliding";q=100;w=60;burst=1000',
  ];
  const LIMITS = [
    '"default";r=50;t=30',
    '"default";r=999;pk=:dHJpYWwxMjEzMjM=:',
    '"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:',
    '"problemPolicy";r=0;t=10',
    '"default";r=1;t=7',
    '"daily";r=1;t=36400',
    '"somepolicy";r=10000;t=10',
    '"default";r=0;t=50',
    '"dayLimit";r=100;t=36000',
    '"basic";r=60;t=58',
    '"dynamic";r=15;t=40',
    '"default";r=50;t=60',
  ];

  it.each(POLICIES)("RateLimit-Policy: %s", (value) => {
    expect(() => policyItems(value)).not.toThrow();
  });

  it.each(LIMITS)("RateLimit: %s", (value) => {
    expect(() => limitItems(value)).not.toThrow();
  });

  it("reads them as the draft explains them: a partition key's bytes, a quota unit, a window, a reset", () => {
    expect(policyItems('"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:')[0]).toMatchObject({ name: "peruser", q: 65535, qu: "content-bytes", w: 10 });
    expect(limitItems('"default";r=999;pk=:dHJpYWwxMjEzMjM=:')[0]).toEqual({ name: "default", r: 999, t: undefined, pk: ":dHJpYWwxMjEzMjM=:" });
    expect(Buffer.from("dHJpYWwxMjEzMjM=", "base64").toString()).toBe("trial121323");
  });

  it('refuses the appendix\'s "missing remaining information" example, which breaks the draft\'s own rules', () => {
    expect(() => policyItems("quota;q=100;w=1")).toThrow("an Item's value must be a String (got Token)");
    expect(() => limitItems("quota;t=1")).toThrow("an Item's value must be a String (got Token)");
    expect(() => limitItems('"quota";t=1')).toThrow('the "r" parameter is required');
  });
});

// ---- what the limiter emits -------------------------------------------------------------------

function header(decision: Decision, name: string): string | undefined {
  return decision.headers.find((h) => h.name === name)?.value;
}

/**
 * Every header of the decision, parsed and held to what it must mean: the
 * policy of every enforcing rule that applies (`rules`, in the rule book's
 * order), the service limit of every enforcing rule that was read, and
 * Retry-After no earlier than a refusing rule's t.
 */
function expectHeadersToMeanTheDecision(decision: Decision, rules: readonly Rule[]): void {
  const enforcing = rules.filter((rule) => rule.action !== "LOG_ONLY");
  const policies = policyItems(header(decision, "RateLimit-Policy")!);
  expect(policies.map((p) => p.name)).toEqual(enforcing.map((rule) => rule.name));
  for (const [i, policy] of policies.entries()) {
    const rule = enforcing[i]!;
    const result = decision.results.find((r) => r.rule.id === rule.id)!;
    expect(policy.q).toBe(rule.limit);
    expect(policy.w).toBe(windowSecondsOf(rule.window, rule.windowUnit));
    expect(policy.qu).toBeUndefined();
    expect(policy.params.get("fg-burst")).toBe(usesBurst(rule.algorithm) ? (rule.burst ?? rule.limit) : undefined);
    expect(policy.pk).toBe(partitionKey(result.key));
  }
  const read = decision.results.filter((r) => r.rule.action !== "LOG_ONLY" && r.consulted);
  const limitsValue = header(decision, "RateLimit");
  const limits = limitsValue === undefined ? [] : limitItems(limitsValue);
  expect(limits.map((l) => l.name)).toEqual(read.map((r) => r.rule.name));
  for (const [i, limit] of limits.entries()) {
    const result = read[i]!;
    expect(limit.r).toBe(result.remaining);
    expect(limit.pk).toBe(partitionKey(result.key));
    if (!result.allowed) expect(limit.t).toBe(result.retryAfter);
    else if (result.remaining >= result.limit) expect(limit.t).toBeUndefined();
    else expect(limit.t).toBeGreaterThan(0);
  }
  expectWaitsToAgree(decision);
  const retryAfter = header(decision, "Retry-After");
  if (decision.allowed) expect(retryAfter).toBeUndefined();
  else {
    expect(Number(retryAfter)).toBe(decision.retryAfter);
    for (const limit of limits) if (limit.r === 0 || decision.results.find((r) => r.rule.name === limit.name)!.allowed === false) expect(Number(retryAfter)).toBeGreaterThanOrEqual(limit.t ?? 0);
  }
}

/**
 * Every wait given twice agrees: retryAfterMs in whole milliseconds (at
 * least one), retryAfter it rounded up to seconds, on the decision (the
 * deciding rule's) and on every result; neither when nothing refuses.
 */
function expectWaitsToAgree(decision: Decision): void {
  for (const { retryAfter, retryAfterMs } of [decision, ...decision.results]) {
    if (retryAfterMs === null) {
      expect(retryAfter).toBeNull();
      continue;
    }
    expect(Number.isInteger(retryAfterMs) && retryAfterMs >= 1).toBe(true);
    expect(retryAfter).toBe(Math.ceil(retryAfterMs / 1000));
  }
  if (decision.allowed) expect(decision.retryAfterMs).toBeNull();
  else if (decision.source !== "SCREENING") expect(decision.retryAfterMs).toBe(decision.results.find((r) => r.rule.id === decision.rule?.id)!.retryAfterMs);
}

function request(fields: Partial<CheckRequest> = {}): CheckRequest {
  return makeCheckRequest({ userId: "u1", ip: "10.0.0.1", ...fields });
}

describe("the fields the limiter emits, on every path (in-process store)", () => {
  let clock: ManualClock;
  let counting: CountingCounterStore;
  let book: RuleBook;
  let limiter: Limiter;
  beforeEach(() => {
    clock = new ManualClock();
    counting = new CountingCounterStore(new MemoryCounterStore({ clock, sweepIntervalMs: 0 }));
    book = new RuleBook();
    limiter = new Limiter(book, counting, null, clock, { overLimit: new OverLimitCache(100) });
  });
  const check = async (fields: Partial<CheckRequest> = {}) => (await limiter.check(BOOTSTRAP, [request(fields)]))[0]!;

  // CONCURRENCY never reaches the cache (over-limit-cache.test.ts): its refusals end with a release.
  for (const algorithm of ALGORITHMS.filter((a) => a !== "CONCURRENCY")) {
    it(`${algorithm}: from a full bucket to refusals from the store and from the cache, and a dry run that asks the store`, async () => {
      const perUser = makeRule({ name: "per-user", scope: ["USER"], algorithm, limit: 3, window: 10, ...(usesBurst(algorithm) ? { burst: 4 } : {}) });
      const perIp = makeRule({ name: "per-ip", scope: ["IP"], algorithm: "FIXED_WINDOW", limit: 100, window: 1, windowUnit: "MINUTES" });
      const shadow = makeRule({ name: "shadow", scope: ["USER"], limit: 1, action: "LOG_ONLY" });
      book.load([perUser, perIp, shadow]);
      const rules = book.match(request()).map((compiled) => compiled.rule);

      const dry = await check({ dryRun: true });
      expectHeadersToMeanTheDecision(dry, rules);
      // A dry run reports the bucket as this request would leave it.
      expect(limitItems(header(dry, "RateLimit")!).find((l) => l.name === "per-user")).toMatchObject({ name: "per-user", r: usesBurst(algorithm) ? 3 : 2, pk: partitionKey("user:u1") });

      const policy = header(dry, "RateLimit-Policy");
      let decision = dry;
      for (let i = 0; i < 8 && decision.source !== "OVER_LIMIT_CACHE"; i++) {
        decision = await check();
        expectHeadersToMeanTheDecision(decision, rules);
        expect(header(decision, "RateLimit-Policy")).toBe(policy);
        clock.advance(100);
      }
      expect(decision).toMatchObject({ allowed: false, source: "OVER_LIMIT_CACHE" });

      const asked = counting.decideSizes.length;
      const dryAfter = await check({ dryRun: true });
      expect(counting.decideSizes.length).toBe(asked + 1);
      expect(dryAfter.source).toBe("COUNTER_STORE");
      expect(dryAfter.results.every((r) => r.consulted && r.readAt?.getTime() === clock.now())).toBe(true);
      expectHeadersToMeanTheDecision(dryAfter, rules);
      expect(header(dryAfter, "RateLimit-Policy")).toBe(policy);
    });
  }
});

describe("retryAfterMs: the wait to the millisecond (in-process store, a pinned clock)", () => {
  it("gives a token bucket's next token at its own pace, where Retry-After can only say a second, on the store path and the cache path", async () => {
    const clock = new ManualClock();
    const book = new RuleBook();
    const counting = new CountingCounterStore(new MemoryCounterStore({ clock, sweepIntervalMs: 0 }));
    const limiter = new Limiter(book, counting, null, clock, { overLimit: new OverLimitCache(100) });
    const check = async () => (await limiter.check(BOOTSTRAP, [request()]))[0]!;
    // Ten a second, one at a time: a token every 100 ms.
    book.load([makeRule({ name: "per-user", scope: ["USER"], algorithm: "TOKEN_BUCKET", limit: 10, window: 1, burst: 1 })]);
    expect(await check()).toMatchObject({ allowed: true, retryAfter: null, retryAfterMs: null });
    const fromStore = await check();
    expect(fromStore).toMatchObject({ allowed: false, source: "COUNTER_STORE", retryAfter: 1, retryAfterMs: 100 });
    expect(fromStore.results[0]).toMatchObject({ retryAfter: 1, retryAfterMs: 100 });
    expect(header(fromStore, "Retry-After")).toBe("1");
    clock.advance(40);
    const fromCache = await check();
    expect(fromCache).toMatchObject({ allowed: false, source: "OVER_LIMIT_CACHE", retryAfter: 1, retryAfterMs: 60 });
    expect(fromCache.results[0]).toMatchObject({ retryAfter: 1, retryAfterMs: 60 });
    clock.advance(60);
    expect(await check()).toMatchObject({ allowed: true, source: "COUNTER_STORE", retryAfterMs: null });
  });
});

describe("what an admitting rule's t promises (in-process store, a pinned clock)", () => {
  /** Where quota comes back one unit at a time and the reply says when: t is exact; elsewhere t is when the bucket is whole, a bound. */
  const EXACT = new Set(["FIXED_WINDOW", "TOKEN_BUCKET", "LEAKY_BUCKET"]);

  for (const algorithm of ALGORITHMS) {
    for (const spent of [1, 2]) {
      it(`${algorithm}, ${spent} of 3 spent: a unit more is there ${EXACT.has(algorithm) ? "after t seconds, and not a second before" : "after t seconds at the latest"}`, async () => {
        const clock = new ManualClock();
        const book = new RuleBook();
        const store = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
        const limiter = new Limiter(book, store, null, clock);
        book.load([makeRule({ name: "r", scope: ["USER"], algorithm, limit: 3, window: 10 })]);
        const check = async (dryRun: boolean) => (await limiter.check(BOOTSTRAP, [request({ dryRun })]))[0]!;
        // Steps of 700 ms between requests, so that neither a window nor a unit lines up with a whole second.
        let last = await check(false);
        for (let i = 1; i < spent; i++) {
          clock.advance(700);
          last = await check(false);
        }
        const { r, t } = limitItems(header(last, "RateLimit")!)[0]!;
        expect(r).toBe(3 - spent);
        // A dry run reports the bucket as a request would leave it: r or more means a unit more than r is there.
        const leftAfter = async (ms: number) => {
          clock.set(last.decidedAt.getTime() + ms);
          const dry = await check(true);
          return dry.allowed ? dry.remaining! : -1;
        };
        expect(await leftAfter(t! * 1000)).toBeGreaterThanOrEqual(r);
        if (EXACT.has(algorithm)) expect(await leftAfter((t! - 1) * 1000)).toBe(r - 1);
      });
    }
  }
});

// ---- two clocks: Redis's TIME and this instance's, seven minutes apart ----------------------------

const SKEW_MS = 7 * 60_000;

describe.runIf(await redisAvailable())("with this instance's clock 7 minutes ahead of Redis's", () => {
  let clock: ManualClock;
  let cleanup: () => Promise<void>;
  let store: CounterStore;
  let counting: CountingCounterStore;
  let limiter: Limiter;
  let book: RuleBook;
  let redisNowMs: () => Promise<number>;
  beforeEach(async () => {
    clock = new ManualClock(Date.now() + SKEW_MS);
    const redis = testRedis();
    redisNowMs = async () => {
      const [seconds, micros] = await redis.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    cleanup = redis.cleanup;
    // No clock for the store: decide.lua takes the time from Redis (TIME), as in production.
    store = new RedisCounterStore(redis.redis, { layout: new KeyLayout(redis.prefix, 64) });
    counting = new CountingCounterStore(store);
    book = new RuleBook();
    limiter = new Limiter(book, counting, null, clock, { overLimit: new OverLimitCache(100) });
  });
  afterAll(async () => {
    await cleanup?.();
  });
  const check = async (fields: Partial<CheckRequest> = {}) => (await limiter.check(BOOTSTRAP, [request(fields)]))[0]!;

  it("store path, then cache path: the refusal as Redis read it, its waits counted down on this instance's clock, the reset instant unmoved", async () => {
    const rule = makeRule({ name: "per-user", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 2, window: 1, windowUnit: "HOURS" });
    // The cached refusal must outlive the 10 s the clock is advanced: not in the window's last seconds by Redis's clock.
    const intoWindowMs = (await redisNowMs()) % 3_600_000;
    if (intoWindowMs > 3_600_000 - 15_000) await new Promise((resolve) => setTimeout(resolve, 3_600_000 - intoWindowMs + 100));
    book.load([rule]);
    await check();
    await check();
    const before = Date.now();
    const fromStore = await check();
    const after = Date.now();
    expect(fromStore).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
    // Redis's time, not this instance's.
    expect(fromStore.decidedAt.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(fromStore.decidedAt.getTime()).toBeLessThanOrEqual(after + 1000);
    const [result] = fromStore.results;
    expect(result!.readAt).toEqual(fromStore.decidedAt);
    const resetInMs = result!.resetAt.getTime() - fromStore.decidedAt.getTime();
    expect(resetInMs).toBeGreaterThan(0);
    expect(resetInMs).toBeLessThanOrEqual(3_600_000);
    // A fixed window admits again when it ends: the wait is the time to the reset.
    expect(fromStore.retryAfter).toBe(Math.ceil(resetInMs / 1000));
    expect(limitItems(header(fromStore, "RateLimit")!)[0]!.t).toBe(fromStore.retryAfter);
    expect(header(fromStore, "X-RateLimit-Reset")).toBe(String(Math.ceil(result!.resetAt.getTime() / 1000)));
    expectHeadersToMeanTheDecision(fromStore, [rule]);

    clock.advance(10_000);
    const fromCache = await check();
    expect(fromCache.source).toBe("OVER_LIMIT_CACHE");
    expect(fromCache.results[0]).toMatchObject({ remaining: result!.remaining, resetAt: result!.resetAt, readAt: result!.readAt, consulted: true });
    expect(fromCache.retryAfter).toBe(fromStore.retryAfter! - 10);
    expect(limitItems(header(fromCache, "RateLimit")!)[0]!.t).toBe(fromStore.retryAfter! - 10);
    expect(header(fromCache, "X-RateLimit-Reset")).toBe(header(fromStore, "X-RateLimit-Reset"));
    expect(header(fromCache, "Retry-After")).toBe(String(fromStore.retryAfter! - 10));
    expect(header(fromCache, "RateLimit-Policy")).toBe(header(fromStore, "RateLimit-Policy"));
    expectHeadersToMeanTheDecision(fromCache, [rule]);

    // A dry run asks Redis, whatever the cache holds, and reads what is there now.
    const asked = counting.decideSizes.length;
    const dry = await check({ dryRun: true });
    expect(counting.decideSizes.length).toBe(asked + 1);
    expect(dry.source).toBe("COUNTER_STORE");
    expect(dry.results[0]!.readAt!.getTime()).toBeLessThan(clock.now() - SKEW_MS + 60_000);
    expect(dry.results[0]!.resetAt).toEqual(result!.resetAt);
  });

  it("store path, admitting: t is the time to Redis's reset, and X-RateLimit-Reset its instant", async () => {
    const rule = makeRule({ name: "per-user", scope: ["USER"], algorithm: "SLIDING_WINDOW_LOG", limit: 5, window: 30 });
    book.load([rule]);
    const decision = await check();
    const [result] = decision.results;
    const resetInMs = result!.resetAt.getTime() - result!.readAt!.getTime();
    expect(resetInMs).toBe(30_000);
    expect(limitItems(header(decision, "RateLimit")!)[0]).toMatchObject({ r: 4, t: 30 });
    expect(Number(header(decision, "X-RateLimit-Reset")) * 1000 - Date.now()).toBeLessThanOrEqual(31_000);
    expectHeadersToMeanTheDecision(decision, [rule]);
  });
});

describe("degraded, with this instance's clock 7 minutes ahead of the world", () => {
  let clock: ManualClock;
  let redis: Redis;
  let limiter: Limiter;
  let book: RuleBook;
  beforeAll(async () => {
    // A Redis that is not there: every call fails, and each rule's failure mode decides.
    redis = new Redis({ port: await freePort(), lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    redis.on("error", () => undefined);
  });
  afterAll(() => redis.disconnect());
  beforeEach(() => {
    clock = new ManualClock(Date.now() + SKEW_MS);
    const store = new ResilientCounterStore({
      primary: new RedisCounterStore(redis, { layout: new KeyLayout("fgtest:degraded:", 16) }),
      local: new MemoryCounterStore({ clock, sweepIntervalMs: 0 }),
      breakers: { failureThreshold: 1, openMs: 5_000 },
      instances: 1,
      timeoutMs: 1_000,
      clock,
    });
    book = new RuleBook();
    limiter = new Limiter(book, store, null, clock, { overLimit: new OverLimitCache(100) });
  });
  const check = async (fields: Partial<CheckRequest> = {}) => (await limiter.check(BOOTSTRAP, [request(fields)]))[0]!;

  it("CLOSED refuses until the next trial, LOCAL counts on this instance's clock, OPEN admits: every field on that one clock, the policy unchanged", async () => {
    const closed = makeRule({ name: "closed", scope: ["USER"], limit: 5, window: 60, failureMode: "CLOSED" });
    const local = makeRule({ name: "local", scope: ["IP"], algorithm: "FIXED_WINDOW", limit: 5, window: 60, failureMode: "LOCAL" });
    const open = makeRule({ name: "open", scope: ["USER"], limit: 5, window: 60, failureMode: "OPEN" });
    book.load([local, open]);
    const admitted = await check();
    expect(admitted).toMatchObject({ allowed: true, degraded: true, source: "COUNTER_STORE" });
    expect(admitted.decidedAt.getTime()).toBe(clock.now());
    const counted = admitted.results.find((r) => r.rule.name === "local")!;
    expect(counted.remaining).toBe(4);
    expect(counted.resetAt.getTime() - clock.now()).toBeGreaterThan(0);
    expect(counted.resetAt.getTime() - clock.now()).toBeLessThanOrEqual(60_000);
    expect(limitItems(header(admitted, "RateLimit")!).find((l) => l.name === "local")!.t).toBe(Math.ceil((counted.resetAt.getTime() - clock.now()) / 1000));
    expectHeadersToMeanTheDecision(admitted, book.match(request()).map((compiled) => compiled.rule));

    book.load([closed, local, open]);
    const rules = book.match(request()).map((compiled) => compiled.rule);
    const decision = await check();
    expect(decision).toMatchObject({ allowed: false, degraded: true, source: "COUNTER_STORE" });
    expect(decision.decidedAt.getTime()).toBe(clock.now());
    expect(decision.results.every((r) => r.readAt === null)).toBe(true);
    const byName = Object.fromEntries(decision.results.map((r) => [r.rule.name, r]));
    expect(byName.closed).toMatchObject({ allowed: false, remaining: 0, retryAfter: 5 });
    expect(header(decision, "Retry-After")).toBe("5");
    expect(limitItems(header(decision, "RateLimit")!).find((l) => l.name === "closed")!.t).toBe(5);
    expect(header(decision, "X-RateLimit-Reset")).toBe(String(Math.ceil(decision.resetAt!.getTime() / 1000)));
    expectHeadersToMeanTheDecision(decision, rules);

    // The policy a client is shown is the one a healthy store's decision shows.
    const healthy = new Limiter(book, new MemoryCounterStore({ clock, sweepIntervalMs: 0 }), null, clock);
    expect(header(decision, "RateLimit-Policy")).toBe(header((await healthy.check(BOOTSTRAP, [request()]))[0]!, "RateLimit-Policy"));
  });
});
