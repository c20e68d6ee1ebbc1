/**
 * Two instances of the service on one Postgres database and one Redis key
 * prefix, as behind a load balancer: a rule changed through either is
 * enforced by both within a second, a bucket reset through either is
 * forgotten by both (over-limit caches included), and a dashboard subscribed on one sees
 * the throttles decided on the other, filtered, and coalesced under a flood.
 *
 * Propagation is asserted as a generous upper bound (1 s, the issue's) and
 * the measured times are printed: nothing here depends on how fast it is.
 */

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CheckBatchVerdictsDocument,
  CheckLimitsDocument,
  CheckLimitsSourceDocument,
  DeleteRuleDocument,
  NearLimitEventsDocument,
  ResetLimitDocument,
  RuleChangesDocument,
  ThrottleEventsDocument,
  UpdateRuleDocument,
  type CheckLimitsInput,
  type RuleChangesSubscription,
  type ThrottleEventsSubscription,
} from "../generated/graphql.js";
import { check, createRule, newTenant, realStorageAvailable, warmUp } from "../support/api.js";
import { startTestApps } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { subscribe, type TestSubscription } from "../support/subscriptions.js";

const PROPAGATION_BOUND_MS = 1000;
const FLOOD = 50_000;
const BATCH = 1000;

type Throttle = ThrottleEventsSubscription["throttleEvents"];

describe.runIf(await realStorageAvailable())("two instances on one Postgres and one Redis", () => {
  let stopFleet: () => Promise<void>;
  let a: TestApp;
  let b: TestApp;
  const subscriptions: TestSubscription<unknown>[] = [];
  const measured: string[] = [];

  beforeAll(async () => {
    const fleet = await startTestApps(2);
    [a, b] = fleet.apps as [TestApp, TestApp];
    stopFleet = fleet.stop;
    await warmUp(fleet.apps);
  });

  afterAll(async () => {
    await Promise.all(subscriptions.splice(0).map((s) => s.close()));
    await stopFleet?.();
    if (measured.length > 0) console.log(`measured on this machine:\n  ${measured.join("\n  ")}`);
  });

  /** Notes how long a mutation took to return, for telling the write from the propagation in the times printed. */
  async function timed<T>(what: string, mutation: Promise<T>): Promise<T> {
    const sent = performance.now();
    const result = await mutation;
    measured.push(`${what} returned after ${(performance.now() - sent).toFixed(1)} ms`);
    return result;
  }

  /** Checks (dry runs, which count nothing) until `done` holds; returns how long it took from `since`. */
  async function untilDecision(on: TestApp, request: CheckLimitsInput, done: (d: Awaited<ReturnType<typeof check>>) => boolean, since: number): Promise<number> {
    const deadline = since + 5 * PROPAGATION_BOUND_MS;
    for (;;) {
      const decision = (await on.client.data(CheckLimitsDocument, { request: { ...request, dryRun: true } })).checkLimits;
      if (done(decision)) return performance.now() - since;
      if (performance.now() > deadline) throw new Error(`no such decision within ${deadline - since} ms: ${JSON.stringify(decision)}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  function record(what: string, ms: number): void {
    measured.push(`${what}: ${ms.toFixed(1)} ms`);
    expect(ms, what).toBeLessThan(PROPAGATION_BOUND_MS);
  }

  function throttleSubscription(on: TestApp, variables: { tenantId?: string; ruleId?: string }): TestSubscription<ThrottleEventsSubscription> {
    const subscription = subscribe(on.app.url, ThrottleEventsDocument, variables, on.adminToken);
    subscriptions.push(subscription);
    return subscription;
  }

  /** Makes `rule` refuse a key of its own on `on`, so that a throttle event is published for it. */
  async function refuse(on: TestApp, request: CheckLimitsInput): Promise<void> {
    await check(on.client, request);
    expect((await check(on.client, request)).allowed).toBe(false);
  }

  /** A per-user rule of a new tenant with limit 1, created on A, known to B, and already refusing user u1. */
  async function ruleRefusingU1() {
    const tenantId = newTenant();
    const rule = await createRule(a.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    await untilDecision(b, { tenantId, userId: "u1" }, (d) => d.rule?.id === rule.id, performance.now());
    await refuse(a, { tenantId, userId: "u1" });
    return { tenantId, rule };
  }

  const throttles = (s: TestSubscription<ThrottleEventsSubscription>): Throttle[] => s.received.map((r) => r.data.throttleEvents);

  it("enforces on B, within 1 s, a rule created on A", async () => {
    const tenantId = newTenant();
    const sent = performance.now();
    const rule = await timed("  createRule on A", createRule(a.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" }));
    record("rule created on A, enforced on B", await untilDecision(b, { tenantId, userId: "u1" }, (d) => d.rule?.id === rule.id, sent));
    expect((await check(b.client, { tenantId, userId: "u1" })).allowed).toBe(true);
    expect(await check(b.client, { tenantId, userId: "u1" })).toMatchObject({ allowed: false, rule: { id: rule.id } });
    expect((await check(a.client, { tenantId, userId: "u1" })).allowed).toBe(false);
  });

  it("changes A's decisions, within 1 s, when B updates the rule", async () => {
    const { tenantId, rule } = await ruleRefusingU1();
    const sent = performance.now();
    await timed("  updateRule on B", b.client.data(UpdateRuleDocument, { id: rule.id, input: { limit: 3 } }));
    record("rule updated on B, enforced on A", await untilDecision(a, { tenantId, userId: "u1" }, (d) => d.limit === 3, sent));
    expect(await check(a.client, { tenantId, userId: "u1" })).toMatchObject({ allowed: true, remaining: 1 });
  });

  it("stops enforcing on A, within 1 s, a rule deleted on B", async () => {
    const { tenantId, rule } = await ruleRefusingU1();
    const sent = performance.now();
    await timed("  deleteRule on B", b.client.data(DeleteRuleDocument, { id: rule.id }));
    record("rule deleted on B, gone on A", await untilDecision(a, { tenantId, userId: "u1" }, (d) => d.rule === null, sent));
    expect(await check(a.client, { tenantId, userId: "u1" })).toMatchObject({ allowed: true, rule: null });
  });

  it("admits on B, within 1 s, a bucket reset through A that B's over-limit cache was refusing", async () => {
    const { tenantId, rule } = await ruleRefusingU1();
    const u1 = { tenantId, userId: "u1" };
    expect((await check(b.client, u1)).allowed).toBe(false);
    expect((await b.client.data(CheckLimitsSourceDocument, { request: u1 })).checkLimits).toMatchObject({ allowed: false, source: "OVER_LIMIT_CACHE" });
    const sent = performance.now();
    expect((await timed("  resetLimit on A", a.client.data(ResetLimitDocument, { ruleId: rule.id, key: "user:u1" }))).resetLimit).toBe(true);
    record("bucket reset on A, admitted on B", await untilDecision(b, u1, (d) => d.allowed, sent));
    expect((await b.client.data(CheckLimitsSourceDocument, { request: u1 })).checkLimits).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    expect((await check(a.client, u1)).allowed).toBe(false);
  });

  it("tells a ruleChanges subscriber on A of a change made on B", async () => {
    const tenantId = newTenant();
    const changes = subscribe(a.app.url, RuleChangesDocument, { tenantId }, a.adminToken);
    subscriptions.push(changes);
    await changes.ready(
      (attempt) => createRule(a.client, { tenantId, name: `probe-${attempt}`, limit: 1, window: 1 }).then(() => undefined),
      (c) => c.ruleChanges.rule?.name.startsWith("probe-") ?? false,
    );
    const rule = await createRule(b.client, { tenantId, name: "made on B", limit: 1, window: 1 });
    await b.client.data(UpdateRuleDocument, { id: rule.id, input: { limit: 2 } });
    const events = await changes.until((received) => received.some((c) => c.ruleChanges.ruleId === rule.id && c.ruleChanges.version === 2));
    const ofRule = events.map((c: RuleChangesSubscription) => c.ruleChanges).filter((c) => c.ruleId === rule.id);
    expect(ofRule.map((c) => [c.kind, c.version, c.rule?.limit])).toEqual([
      ["CREATED", 1, 1],
      ["UPDATED", 2, 2],
    ]);
  });

  it("delivers to subscribers on A the throttle events decided on B, within 1 s, filtered by tenant and rule", async () => {
    const [t1, t2] = [newTenant(), newTenant()];
    const perUser = await createRule(a.client, { tenantId: t1, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    const perIp = await createRule(a.client, { tenantId: t1, name: "per-ip", scope: ["IP"], limit: 1, window: 1, windowUnit: "HOURS" });
    const otherTenant = await createRule(a.client, { tenantId: t2, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    for (const rule of [perUser, perIp, otherTenant]) {
      await untilDecision(b, { tenantId: rule.tenantId, userId: "x", ip: "10.0.0.1" }, (d) => d.results.some((r) => r.rule.id === rule.id), performance.now());
    }
    const byRule = throttleSubscription(a, { tenantId: t1, ruleId: perUser.id });
    const byTenant = throttleSubscription(a, { tenantId: t1 });
    const everything = throttleSubscription(a, {});
    const probe = (attempt: number) => refuse(a, { tenantId: t1, userId: `probe-${attempt}-${randomUUID()}` });
    const isProbe = (e: ThrottleEventsSubscription) => e.throttleEvents.key.startsWith("user:probe-");
    for (const subscription of [byRule, byTenant, everything]) await subscription.ready(probe, isProbe);

    await check(b.client, { tenantId: t1, userId: "u1" });
    const deniedAt = Date.now();
    expect((await check(b.client, { tenantId: t1, userId: "u1" })).allowed).toBe(false);
    await byRule.until((events) => events.some((e) => e.throttleEvents.key === "user:u1"));
    const arrived = byRule.received.find((r) => r.data.throttleEvents.key === "user:u1")!;
    record("throttle decided on B, received by a subscriber on A", arrived.at - deniedAt);
    await refuse(b, { tenantId: t1, ip: "10.0.0.9" });
    await refuse(b, { tenantId: t2, userId: "u1" });
    await everything.until((events) => events.some((e) => e.throttleEvents.ruleId === otherTenant.id));
    // One more probe, decided after everything else: once a subscription has it, it has had every event before it.
    await probe(1000);
    for (const subscription of [byRule, byTenant]) await subscription.until((events) => events.filter(isProbe).length >= 2);

    // The unfiltered subscription also hears the fleet's other tests (their coalesced events can arrive late): only this test's tenants are its business.
    const ours = (e: Throttle) => e.tenantId === t1 || e.tenantId === t2;
    const seen = (s: TestSubscription<ThrottleEventsSubscription>) =>
      new Set(throttles(s).filter((e) => ours(e) && !isProbe({ throttleEvents: e })).map((e) => `${e.ruleId} ${e.key}`));
    expect(seen(byRule)).toEqual(new Set([`${perUser.id} user:u1`]));
    expect(seen(byTenant)).toEqual(new Set([`${perUser.id} user:u1`, `${perIp.id} ip:10.0.0.9`]));
    expect(seen(everything)).toEqual(new Set([`${perUser.id} user:u1`, `${perIp.id} ip:10.0.0.9`, `${otherTenant.id} user:u1`]));
    expect(throttles(byRule).find((e) => e.key === "user:u1")).toMatchObject({ tenantId: t1, ruleName: "per-user", action: "REJECT", limit: 1, shadow: false, count: 1 });
  });

  it("delivers to a nearLimitEvents subscriber on A the nearly spent buckets decided on B", async () => {
    const tenantId = newTenant();
    const rule = await createRule(a.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
    await untilDecision(b, { tenantId, userId: "x" }, (d) => d.rule?.id === rule.id, performance.now());
    const nearLimits = subscribe(a.app.url, NearLimitEventsDocument, { tenantId, ruleId: rule.id }, a.adminToken);
    subscriptions.push(nearLimits);
    // Limit 1: a user's first request leaves remaining 0, under 10% of the limit.
    await nearLimits.ready(
      (attempt) => check(a.client, { tenantId, userId: `probe-${attempt}` }).then(() => undefined),
      (e) => e.nearLimitEvents.key.startsWith("user:probe-"),
    );
    expect(await check(b.client, { tenantId, userId: "u1" })).toMatchObject({ allowed: true, remaining: 0, nearLimit: true });
    const events = await nearLimits.until((received) => received.some((e) => e.nearLimitEvents.key === "user:u1"));
    expect(events.find((e) => e.nearLimitEvents.key === "user:u1")!.nearLimitEvents).toMatchObject({
      tenantId,
      ruleId: rule.id,
      limit: 1,
      remaining: 0,
      shadow: false,
      count: 1,
    });
  });

  it(`coalesces a flood of ${FLOOD} denials decided on B into a bounded number of events on A whose counts add up exactly`, { timeout: 120_000 }, async () => {
    const tenantId = newTenant();
    const rule = await createRule(a.client, { tenantId, name: "flooded", scope: ["USER"], limit: 1, window: 1, windowUnit: "DAYS" });
    await untilDecision(b, { tenantId, userId: "x" }, (d) => d.rule?.id === rule.id, performance.now());
    const dashboard = throttleSubscription(a, { tenantId, ruleId: rule.id });
    await dashboard.ready(
      (attempt) => refuse(a, { tenantId, userId: `probe-${attempt}` }),
      (e) => e.throttleEvents.key.startsWith("user:probe-"),
    );

    const flood: CheckLimitsInput = { tenantId, userId: "flood", resource: "/api/orders", method: "POST" };
    expect((await check(b.client, flood)).allowed).toBe(true);
    const started = performance.now();
    let denied = 0;
    const requests = Array.from({ length: BATCH }, () => flood);
    // Two batches in flight at a time, as two callers of B would send them.
    for (let sent = 0; sent < FLOOD; sent += 2 * BATCH) {
      const replies = await Promise.all([0, 1].map(() => b.client.data(CheckBatchVerdictsDocument, { requests })));
      denied += replies.flatMap((r) => r.checkLimitsBatch).filter((d) => !d.allowed).length;
    }
    const seconds = (performance.now() - started) / 1000;
    expect(denied).toBe(FLOOD);

    const ofFlood = () => throttles(dashboard).filter((e) => e.key === "user:flood");
    await dashboard.until(() => ofFlood().reduce((sum, e) => sum + e.count, 0) >= FLOOD, 10_000);
    const events = ofFlood();
    const counted = events.reduce((sum, e) => sum + e.count, 0);
    measured.push(
      `flood over HTTP: ${FLOOD} denials in ${seconds.toFixed(1)} s (${Math.round(FLOOD / seconds)}/s) on B -> ${events.length} events on A, counts summing to ${counted}`,
    );
    expect(counted).toBe(FLOOD);
    // One event at once, then at most one per 1 s interval while the flood lasts, and one for its tail.
    expect(events.length).toBeLessThanOrEqual(Math.ceil(seconds) + 3);
  });
});
