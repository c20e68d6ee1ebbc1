/**
 * Bans on two instances sharing one Postgres database and one Redis key
 * prefix: a ban placed through one is enforced by the other within a second,
 * and so is its lifting; refusals of one bucket spread over both instances
 * count together towards its rule's autoBan, and reaching it at once on both
 * makes one ban, not two.
 *
 * Propagation is asserted as a generous upper bound (1 s) and the measured
 * times are printed.
 */

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { BanDocument, BanEventsDocument, BansDocument, CheckScreenedDocument, UnbanDocument, type BanEventsSubscription, type CheckLimitsInput } from "../generated/graphql.js";
import { createRule, newTenant, realStorageAvailable } from "../support/api.js";
import { useTwoInstances } from "../support/fleet.js";
import type { TestApp } from "../harness/in-process-app.js";
import { subscribe } from "../support/subscriptions.js";

const PROPAGATION_BOUND_MS = 1000;

describe.runIf(await realStorageAvailable())("bans on two instances", () => {
  let a: TestApp;
  let b: TestApp;
  const measured = useTwoInstances((apps) => ([a, b] = apps));

  const decide = async (on: TestApp, request: CheckLimitsInput) => (await on.client.data(CheckScreenedDocument, { request })).checkLimits;

  /** Dry runs on `on` until `done`; how long from `since` it took, at most the bound. */
  async function until(on: TestApp, request: CheckLimitsInput, done: (banned: boolean) => boolean, since: number, what: string): Promise<void> {
    for (;;) {
      const decision = await decide(on, { ...request, dryRun: true });
      if (done(decision.reason?.code === "BANNED")) break;
      if (performance.now() - since > 5 * PROPAGATION_BOUND_MS) throw new Error(`${what}: not within ${5 * PROPAGATION_BOUND_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const ms = performance.now() - since;
    measured.push(`${what}: ${ms.toFixed(1)} ms`);
    expect(ms, what).toBeLessThan(PROPAGATION_BOUND_MS);
  }

  it("enforces on B, within 1 s, a ban placed on A, and lets the rules decide again within 1 s of its lifting on B", async () => {
    const tenantId = newTenant();
    await createRule(a.client, { tenantId, name: "per user", scope: ["USER"], limit: 100, window: 1, windowUnit: "HOURS" });
    const request = { tenantId, userId: "mallory" };
    let sent = performance.now();
    const ban = (await a.client.data(BanDocument, { input: { tenantId, dimension: "USER", value: "mallory", durationSeconds: 600 } })).ban;
    await until(b, request, (banned) => banned, sent, "ban placed on A, enforced on B");
    sent = performance.now();
    expect((await b.client.data(UnbanDocument, { id: ban.id })).unban).toBe(true);
    await until(a, request, (banned) => !banned, sent, "ban lifted on B, lifted on A");
  });

  it("counts refusals on both instances towards one autoBan, and bans once when both reach it at once", async () => {
    const tenantId = newTenant();
    const refusals = 6;
    const rule = await createRule(a.client, {
      tenantId,
      name: "one an hour",
      scope: ["USER"],
      limit: 1,
      window: 1,
      windowUnit: "HOURS",
      autoBan: { refusals, withinSeconds: 60, banSeconds: 600 },
    });
    const events = subscribe(b.app.url, BanEventsDocument, { tenantId }, b.adminToken);
    try {
      const user = `u-${randomUUID()}`;
      const request = { tenantId, userId: user };
      while ((await decide(b, { ...request, dryRun: true })).results.length === 0) await new Promise((resolve) => setTimeout(resolve, 2));
      const probe = `probe-${randomUUID()}`;
      await events.ready(
        async () => void (await a.client.data(BanDocument, { input: { tenantId, dimension: "USER", value: probe, durationSeconds: 600 } })),
        (event) => event.banEvents.ban.value === probe,
      );
      expect((await decide(a, request)).allowed).toBe(true);
      // Half the refusals on each instance, one by one: neither alone reaches the threshold.
      for (let i = 0; i < refusals - 1; i++) expect((await decide(i % 2 === 0 ? a : b, request)).allowed).toBe(false);
      expect((await a.client.data(BansDocument, { tenantId })).bans.map((ban) => ban.value)).toEqual([probe]);
      // The last refusals at once on both (more than needed): one of them meets the threshold.
      await Promise.all(Array.from({ length: 8 }, (_, i) => decide(i % 2 === 0 ? a : b, request)));
      const sent = performance.now();
      await until(a, request, (banned) => banned, sent, "autoBan placed, enforced on A");
      await until(b, request, (banned) => banned, sent, "autoBan placed, enforced on B");
      const bans = (await b.client.data(BansDocument, { tenantId })).bans.filter((ban) => ban.value !== probe);
      expect(bans).toMatchObject([{ dimension: "USER", value: user, createdBy: `autoBan:${rule.id}` }]);
      // Another round of checks is screened, counting nothing: still one BANNED event.
      await Promise.all(Array.from({ length: 8 }, (_, i) => decide(i % 2 === 0 ? a : b, request)));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const banned = events.received.map((r) => r.data as BanEventsSubscription).filter((e) => e.banEvents.kind === "BANNED" && e.banEvents.ban.value === user);
      expect(banned.map((e) => e.banEvents.ban.id)).toEqual([bans[0]!.id]);
    } finally {
      await events.close();
    }
  });
});
