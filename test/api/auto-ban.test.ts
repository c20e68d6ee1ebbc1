/**
 * A rule's autoBan through the API, on embedded and real storage: after K
 * refusals of one bucket within P seconds the bucket's user is banned for D
 * seconds (reason BANNED, the ban by "autoBan:<rule id>", a banEvents event
 * naming the rule), other users untouched; a LOG_ONLY rule's refusals ban
 * nobody; Rule.autoBan reads back, clears, is kept in the rule's history and
 * rolled back with it, and round-trips through a rules file.
 */

import { expect, it } from "vitest";
import {
  BanEventsDocument,
  BansDocument,
  CheckScreenedDocument,
  ExportRulesDocument,
  ImportRulesDocument,
  RollbackRuleDocument,
  RuleHistoryDocument,
  UpdateRuleDocument,
  type CheckLimitsInput,
} from "../generated/graphql.js";
import { createRule, describeOnEachStorage, expectBadUserInput, newTenant } from "../support/api.js";
import { subscribe } from "../support/subscriptions.js";

const AUTO_BAN = { refusals: 3, withinSeconds: 60, banSeconds: 600 };

await describeOnEachStorage("autoBan", (suite) => {
  const decide = async (request: CheckLimitsInput) => (await suite.client.data(CheckScreenedDocument, { request })).checkLimits;
  const bansOf = async (tenantId: string) => (await suite.client.data(BansDocument, { tenantId })).bans;

  async function oneAnHour(autoBan = AUTO_BAN) {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId, name: "one an hour", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS", autoBan });
    return { tenantId, rule };
  }

  /** Waits until the tenant's bans satisfy `done` (the ban is placed after the refusal's decision is answered). */
  async function bansUntil(tenantId: string, done: (count: number) => boolean) {
    for (let i = 0; i < 200; i++) {
      const bans = await bansOf(tenantId);
      if (done(bans.length)) return bans;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`the bans of ${tenantId} never satisfied the condition`);
  }

  it("bans a user its rule refused K times within P seconds, for D seconds, and nobody else", async () => {
    const { tenantId, rule } = await oneAnHour();
    expect(rule.autoBan).toEqual(AUTO_BAN);
    const events = subscribe(suite.t.app.url, BanEventsDocument, { tenantId }, suite.t.adminToken);
    try {
      await decide({ tenantId, userId: "bob" });
      await decide({ tenantId, userId: "bob" });
      expect((await decide({ tenantId, userId: "mallory" })).allowed).toBe(true);
      const verdicts = [];
      for (let i = 0; i < AUTO_BAN.refusals; i++) verdicts.push(await decide({ tenantId, userId: "mallory" }));
      // Refused by the rule (the store, then the over-limit cache), each refusal counted towards the ban.
      expect(verdicts.map((d) => [d.allowed, d.source === "SCREENING"])).toEqual(verdicts.map(() => [false, false]));
      const [ban] = await bansUntil(tenantId, (count) => count > 0);
      expect(ban).toMatchObject({ tenantId, dimension: "USER", value: "mallory", createdBy: `autoBan:${rule.id}` });
      expect(new Date(ban!.until).getTime() - new Date(ban!.createdAt).getTime()).toBe(AUTO_BAN.banSeconds * 1000);

      const banned = await decide({ tenantId, userId: "mallory" });
      expect(banned).toMatchObject({ allowed: false, source: "SCREENING", reason: { code: "BANNED", until: ban!.until } });
      expect(banned.retryAfter).toBeGreaterThan(AUTO_BAN.banSeconds - 5);
      // bob was refused fewer times: not banned, refused by the rule.
      const bob = await decide({ tenantId, userId: "bob" });
      expect([bob.allowed, bob.reason]).toEqual([false, null]);
      expect(await bansOf(tenantId)).toHaveLength(1);

      const [event] = await events.until((all) => all.length > 0);
      expect(event!.banEvents).toMatchObject({ kind: "BANNED", tenantId, ruleId: rule.id, ban: { id: ban!.id, value: "mallory" } });
    } finally {
      await events.close();
    }
  });

  it("counts nothing for a LOG_ONLY rule, and a cleared autoBan bans nobody", async () => {
    const { tenantId, rule } = await oneAnHour();
    await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { action: "LOG_ONLY" } });
    for (let i = 0; i < 2 * AUTO_BAN.refusals; i++) await decide({ tenantId, userId: "shadowed" });
    const cleared = (await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { action: "REJECT", autoBan: null } })).updateRule;
    expect(cleared.autoBan).toBeNull();
    for (let i = 0; i < 2 * AUTO_BAN.refusals; i++) await decide({ tenantId, userId: "shadowed" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await bansOf(tenantId)).toEqual([]);
  });

  it("refuses an autoBan on a rule with nothing to ban, naming the field", async () => {
    const response = await suite.client.request(UpdateRuleDocument, {
      id: (await createRule(suite.client, { tenantId: newTenant(), name: "per endpoint", scope: ["ENDPOINT"], limit: 1, window: 1 })).id,
      input: { autoBan: AUTO_BAN },
    });
    expectBadUserInput(response.errors, "input.autoBan");
  });

  it("keeps autoBan in the rule's history, and a rollback brings it back", async () => {
    const { rule } = await oneAnHour();
    await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { autoBan: null } });
    const history = (await suite.client.data(RuleHistoryDocument, { id: rule.id })).ruleHistory;
    expect(history.map((revision) => revision.after?.autoBan ?? null)).toEqual([AUTO_BAN, null]);
    const rolledBack = (await suite.client.data(RollbackRuleDocument, { id: rule.id, version: 1 })).rollbackRule;
    expect(rolledBack).toMatchObject({ version: 3, autoBan: AUTO_BAN });
  });

  it("exports autoBan in the rules file, and an import of the export changes nothing", async () => {
    const { tenantId } = await oneAnHour({ refusals: 7, withinSeconds: 30, banSeconds: 90 });
    const yaml = (await suite.client.data(ExportRulesDocument, { tenantId })).exportRules;
    expect(yaml).toContain("    autoBan:\n      refusals: 7\n      withinSeconds: 30\n      banSeconds: 90\n");
    const report = (await suite.client.data(ImportRulesDocument, { yaml })).importRules;
    expect(report).toMatchObject({ applied: true, created: [], updated: [], invalid: [] });
    expect(report.unchanged).toHaveLength(1);
  });
});
