/**
 * Bans through the API, on embedded and real storage: a banned value is
 * refused before any rule with reason BANNED and Retry-After, touching no
 * counter; lifting it lets the rules decide again, and so does its end; IP, API_KEY and CLIENT
 * bans name values as bucket keys show them; validation names the field;
 * the ban and its lifting reach the banEvents subscription.
 */

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import {
  BanDocument,
  BanEventsDocument,
  BansDocument,
  CheckScreenedDocument,
  CreateApiKeyDocument,
  UnbanDocument,
  type BanEventsSubscription,
  type BanInput,
  type CheckLimitsInput,
} from "../generated/graphql.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { createRule, describeOnEachStorage, expectBadUserInput, expectCode, header, newTenant } from "../support/api.js";
import { subscribe } from "../support/subscriptions.js";

await describeOnEachStorage("bans", (suite) => {
  const decide = async (request: CheckLimitsInput) => (await suite.client.data(CheckScreenedDocument, { request })).checkLimits;
  const ban = async (input: BanInput) => (await suite.client.data(BanDocument, { input })).ban;

  async function perUser(scope: ("USER" | "IP" | "API_KEY" | "CLIENT")[] = ["USER"]) {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "per user", scope, algorithm: "SLIDING_WINDOW_LOG", limit: 5, window: 1, windowUnit: "HOURS" });
    return tenantId;
  }

  it("refuses a banned user before any rule, with reason BANNED and Retry-After, counting nothing; unban lets the rules decide again", async () => {
    const tenantId = await perUser();
    const placed = await ban({ tenantId, dimension: "USER", value: "mallory", durationSeconds: 600, note: "scraping" });
    expect(placed).toMatchObject({ tenantId, dimension: "USER", value: "mallory", note: "scraping", createdBy: "bootstrap" });
    expect(new Date(placed.until).getTime() - new Date(placed.createdAt).getTime()).toBe(600_000);

    const refused = await decide({ tenantId, userId: "mallory" });
    expect(refused).toMatchObject({ allowed: false, source: "SCREENING", results: [], resetAt: placed.until });
    expect(refused.reason).toEqual({ code: "BANNED", message: `this request's USER is banned until ${placed.until}`, until: placed.until });
    expect(refused.retryAfter).toBeGreaterThanOrEqual(599);
    expect(header(refused.headers, "Retry-After")).toBe(String(refused.retryAfter));
    expect((await decide({ tenantId, userId: "alice" })).allowed).toBe(true);

    expect((await suite.client.data(BansDocument, { tenantId })).bans).toEqual([placed]);
    expect((await suite.client.data(UnbanDocument, { id: placed.id })).unban).toBe(true);
    expect((await suite.client.data(UnbanDocument, { id: placed.id })).unban).toBe(false);
    expect((await suite.client.data(BansDocument, { tenantId })).bans).toEqual([]);

    // Nothing was counted while the ban refused: the rule still has its whole limit.
    const decided = await decide({ tenantId, userId: "mallory" });
    expect(decided).toMatchObject({ allowed: true, source: "COUNTER_STORE", reason: null, results: [{ key: "user:mallory", remaining: 4 }] });
  });

  it("ends a ban on time, with nothing swept: refused until `until`, admitted and unlisted after it", async () => {
    const tenantId = await perUser();
    const placed = await ban({ tenantId, dimension: "USER", value: "brief", durationSeconds: 1 });
    expect((await decide({ tenantId, userId: "brief" })).reason?.code).toBe("BANNED");
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, new Date(placed.until).getTime() - Date.now()) + 20));
    expect(await decide({ tenantId, userId: "brief" })).toMatchObject({ allowed: true, reason: null });
    expect((await suite.client.data(BansDocument, { tenantId })).bans).toEqual([]);
  });

  it("banning a banned value again gives its ban the new end, keeping its id", async () => {
    const tenantId = await perUser();
    const first = await ban({ tenantId, dimension: "USER", value: "u", durationSeconds: 60 });
    const again = await ban({ tenantId, dimension: "USER", value: "u", durationSeconds: 3600, note: "longer" });
    expect(again).toMatchObject({ id: first.id, note: "longer" });
    expect(new Date(again.until).getTime()).toBeGreaterThan(new Date(first.until).getTime());
    expect((await suite.client.data(BansDocument, { tenantId })).bans).toEqual([again]);
    expect((await decide({ tenantId, userId: "u" })).reason?.until).toBe(again.until);
  });

  it("bans an IP in either spelling, an API key by the digest its bucket keys show, a CLIENT by its fingerprint", async () => {
    const tenantId = await perUser(["IP"]);
    await ban({ tenantId, dimension: "IP", value: "::ffff:10.0.0.9", durationSeconds: 60 });
    expect((await decide({ tenantId, ip: "10.0.0.9" })).reason?.code).toBe("BANNED");

    const byKey = await perUser(["API_KEY"]);
    const [keyBucket] = (await decide({ tenantId: byKey, apiKey: "sk-secret", dryRun: true })).results;
    const digest = keyBucket!.key.replace(/^api_key:/, "");
    expect(digest).not.toContain("sk-secret");
    await ban({ tenantId: byKey, dimension: "API_KEY", value: digest, durationSeconds: 60 });
    expect((await decide({ tenantId: byKey, apiKey: "sk-secret" })).reason?.code).toBe("BANNED");
    expect((await decide({ tenantId: byKey, apiKey: "sk-other" })).allowed).toBe(true);

    const byClient = await perUser(["CLIENT"]);
    const caller = { tenantId: byClient, ip: "10.1.1.1", userAgent: "curl/8" };
    const [clientBucket] = (await decide({ ...caller, dryRun: true })).results;
    await ban({ tenantId: byClient, dimension: "CLIENT", value: clientBucket!.key.replace(/^client:/, ""), durationSeconds: 60 });
    expect((await decide(caller)).reason?.code).toBe("BANNED");
    expect((await decide({ ...caller, userAgent: "curl/9" })).allowed).toBe(true);
  });

  it("refuses bad input naming the field, and stores nothing", async () => {
    const tenantId = await perUser();
    const soon = new Date(Date.now() + 60_000).toISOString();
    const cases: [BanInput, string][] = [
      [{ tenantId, dimension: "USER", value: "u", until: soon, durationSeconds: 60 }, "input.until"],
      [{ tenantId, dimension: "USER", value: "u" }, "input.until"],
      [{ tenantId, dimension: "USER", value: "u", until: "2001-01-01T00:00:00Z" }, "input.until"],
      [{ tenantId, dimension: "USER", value: "u", durationSeconds: 0 }, "input.durationSeconds"],
      [{ tenantId, dimension: "IP", value: "10.0.0.300", durationSeconds: 60 }, "input.value"],
      [{ tenantId, dimension: "USER", value: "", durationSeconds: 60 }, "input.value"],
      [{ tenantId: "*", dimension: "USER", value: "u", durationSeconds: 60 }, "input.tenantId"],
    ];
    for (const [input, field] of cases) expectBadUserInput((await suite.client.request(BanDocument, { input })).errors, field);
    expect((await suite.client.data(BansDocument, { tenantId })).bans).toEqual([]);
  });

  it("lets a tenant's admin ban in its tenant only; a checker may not ban; another tenant's ban cannot be lifted or seen", async () => {
    const tenantId = await perUser();
    const other = await perUser();
    const keyOf = async (tenant: string, role: "TENANT_ADMIN" | "CHECKER") =>
      new GraphQLClient(suite.t.app.url, (await suite.client.data(CreateApiKeyDocument, { input: { tenantId: tenant, role, name: role } })).createApiKey.secret);
    const admin = await keyOf(tenantId, "TENANT_ADMIN");
    const checker = await keyOf(tenantId, "CHECKER");
    const input = { tenantId, dimension: "USER", value: "u", durationSeconds: 60 } as const;
    expectCode((await checker.request(BanDocument, { input })).errors, "FORBIDDEN");
    expectCode((await admin.request(BanDocument, { input: { ...input, tenantId: other } })).errors, "FORBIDDEN");
    const theirs = await ban({ ...input, tenantId: other });
    expect((await admin.data(UnbanDocument, { id: theirs.id })).unban).toBe(false);
    expect((await admin.data(UnbanDocument, { id: randomUUID() })).unban).toBe(false);
    expectCode((await admin.request(BansDocument, { tenantId: other })).errors, "FORBIDDEN");
    const mine = (await admin.data(BanDocument, { input })).ban;
    expect(mine.createdBy).not.toBe("bootstrap");
    expect((await admin.data(BansDocument, {})).bans).toEqual([mine]);
    expect((await decide({ tenantId: other, userId: "u" })).reason?.code).toBe("BANNED");
  });

  it("tells banEvents subscribers of a ban and its lifting", async () => {
    const tenantId = await perUser();
    const events = subscribe(suite.t.app.url, BanEventsDocument, { tenantId }, suite.t.adminToken);
    try {
      const probe = `probe-${randomUUID()}`;
      const probes: string[] = [];
      await events.ready(
        async () => {
          const placed = await ban({ tenantId, dimension: "USER", value: probe, durationSeconds: 60 });
          probes.push(placed.id);
        },
        (event) => event.banEvents.ban.value === probe,
      );
      const placed = await ban({ tenantId, dimension: "USER", value: "m", durationSeconds: 60 });
      await suite.client.data(UnbanDocument, { id: placed.id });
      const received = await events.until((all) => all.some((e: BanEventsSubscription) => e.banEvents.kind === "UNBANNED" && e.banEvents.ban.id === placed.id));
      const mine = received.filter((e) => e.banEvents.ban.id === placed.id).map((e) => [e.banEvents.kind, e.banEvents.ruleId, e.banEvents.tenantId]);
      expect(mine).toEqual([
        ["BANNED", null, tenantId],
        ["UNBANNED", null, tenantId],
      ]);
    } finally {
      await events.close();
    }
  });
});
