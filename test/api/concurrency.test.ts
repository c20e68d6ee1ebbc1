/**
 * CONCURRENCY rules over HTTP: leases handed out by checkLimits and taken
 * back by releaseLease, on each storage. The over-limit cache and the hot
 * bucket budgets are on (LEASE_HOT_CHECKS_PER_SECOND 1): neither may answer
 * for a CONCURRENCY rule, whose refusals end with a release.
 */

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CheckLeaseDocument, CreateRuleDocument, ReleaseLeaseDocument, type CheckLimitsInput } from "../generated/graphql.js";
import { createRule, describeOnEachStorage, expectBadUserInput, newTenant, sleep } from "../support/api.js";

/** Mutations other than releaseLease this suite makes (its rules): the admin limit is set just above them. */
const ADMIN_MUTATIONS = 12;

await describeOnEachStorage(
  "CONCURRENCY rules and their leases",
  (suite) => {
    const checkLease = async (request: CheckLimitsInput) => (await suite.client.data(CheckLeaseDocument, { request })).checkLimits;
    const release = async (id: string) => (await suite.client.data(ReleaseLeaseDocument, { id })).releaseLease;

    async function inFlightRule(limit: number, window = 60, extra: Partial<Parameters<typeof createRule>[1]> = {}) {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "in flight", scope: ["USER"], algorithm: "CONCURRENCY", limit, window, ...extra });
      return { tenantId, rule, request: { tenantId, userId: "u1" } };
    }

    it("admits limit checks in flight, each with a lease, and refuses the next without one until a lease is released", async () => {
      const { request } = await inFlightRule(2);
      const first = await checkLease(request);
      const second = await checkLease(request);
      expect([first.allowed, second.allowed]).toEqual([true, true]);
      expect([first.remaining, second.remaining]).toEqual([1, 0]);
      expect(first.lease!.id).not.toBe(second.lease!.id);
      expect(Date.parse(first.lease!.expiresAt) - Date.now()).toBeGreaterThan(55_000);
      for (let i = 0; i < 3; i++) {
        const refused = await checkLease(request);
        expect(refused).toMatchObject({ allowed: false, lease: null, source: "COUNTER_STORE", remaining: 0 });
        expect(refused.retryAfter).toBeGreaterThan(55);
      }
      expect(await release(first.lease!.id)).toBe(true);
      // At once: no cached refusal stands in the way.
      const third = await checkLease(request);
      expect(third.allowed).toBe(true);
      expect(third.lease).not.toBeNull();
    });

    it("answers false for a lease released twice or expired, never an error", async () => {
      const { request } = await inFlightRule(1, 1);
      const { lease } = await checkLease(request);
      expect(await release(lease!.id)).toBe(true);
      expect(await release(lease!.id)).toBe(false);
      const { lease: expiring } = await checkLease(request);
      await sleep(1_100);
      expect(await release(expiring!.id)).toBe(false);
      expect((await checkLease(request)).allowed).toBe(true);
    });

    it("hands out no lease without a CONCURRENCY rule, in a dry run, or when another rule refuses (which takes no slot either)", async () => {
      const { tenantId, rule, request } = await inFlightRule(2);
      expect((await checkLease({ tenantId: newTenant() })).lease).toBeNull();
      expect(await checkLease({ ...request, dryRun: true })).toMatchObject({ allowed: true, lease: null });
      const spent = await createRule(suite.client, { tenantId, name: "spent", scope: ["USER"], limit: 1, window: 60 });
      const admitted = await checkLease(request);
      expect(admitted.allowed).toBe(true);
      const byOther = await checkLease(request);
      expect(byOther.allowed).toBe(false);
      expect(byOther.lease).toBeNull();
      expect(byOther.results.find((r) => r.rule.id === rule.id)).toMatchObject({ allowed: true, remaining: 1 });
      expect(byOther.results.find((r) => r.rule.id === spent.id)?.allowed).toBe(false);
      expect(await release(admitted.lease!.id)).toBe(true);
      // Both slots are free again: the refused check took none (the dry run, refused by spent, reports the bucket as it stands).
      expect((await checkLease({ ...request, dryRun: true })).results.find((r) => r.rule.id === rule.id)?.remaining).toBe(2);
    });

    it("answers false for an id made up around a real lease's holder, naming buckets of rules that are no CONCURRENCY rule of its tenant, and releases nothing", async () => {
      const { request, rule } = await inFlightRule(1);
      const { lease } = await checkLease(request);
      const [tenantId, holder] = JSON.parse(Buffer.from(lease!.id, "base64url").toString("utf8")) as [string, string];
      const madeUp = Array.from({ length: 150 }, (_, i) => [randomUUID(), `user:u${i}`]);
      const forged = Buffer.from(JSON.stringify([tenantId, holder, madeUp])).toString("base64url");
      expect(await release(forged)).toBe(false);
      expect((await checkLease(request)).allowed).toBe(false);
      // The real rule named again and again is one bucket: the lease is released once.
      const repeated = Buffer.from(JSON.stringify([tenantId, holder, [...madeUp, ...Array.from({ length: 30 }, () => [rule.id, "user:u1"])]])).toString("base64url");
      expect(await release(repeated)).toBe(true);
      expect(await release(lease!.id)).toBe(false);
    });

    it("admits exactly limit of many checks sent at once", async () => {
      const { request } = await inFlightRule(5);
      const decisions = await Promise.all(Array.from({ length: 40 }, () => checkLease(request)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
      expect(decisions.filter((d) => d.lease !== null)).toHaveLength(5);
    });

    it("refuses a lease id it did not issue with BAD_USER_INPUT naming the id", async () => {
      for (const id of ["", "not a lease", Buffer.from('["t", "h"]').toString("base64url")]) {
        expectBadUserInput((await suite.client.request(ReleaseLeaseDocument, { id })).errors, "id");
      }
    });

    it("refuses THROTTLE for a CONCURRENCY rule, naming the action", async () => {
      const input = { tenantId: newTenant(), name: "throttled", algorithm: "CONCURRENCY", action: "THROTTLE", limit: 2, window: 60 } as const;
      expectBadUserInput((await suite.client.request(CreateRuleDocument, { input })).errors, "input.action");
    });

    describe("releaseLease and the admin mutation limit", () => {
      it("counts no release against it: a release ends a check", async () => {
        const { request } = await inFlightRule(1);
        for (let i = 0; i < ADMIN_MUTATIONS + 5; i++) {
          const { lease } = await checkLease(request);
          expect(await release(lease!.id)).toBe(true);
        }
      });
    });
  },
  { ADMIN_MUTATIONS_PER_MINUTE: String(ADMIN_MUTATIONS), LEASE_HOT_CHECKS_PER_SECOND: "1" },
);
