/** Rule history over HTTP: ruleHistory, rollbackRule, promoteRule, and a deletion that keeps the history. */

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import {
  DeleteRuleDocument,
  PromoteRuleDocument,
  RollbackRuleDocument,
  RuleHistoryDocument,
  UpdateRuleDocument,
} from "../generated/graphql.js";
import { check, createRule, describeOnEachStorage, expectBadUserInput, expectCode, newTenant } from "../support/api.js";

await describeOnEachStorage("rule history over HTTP", (suite) => {
  const history = async (id: string) => (await suite.client.data(RuleHistoryDocument, { id })).ruleHistory;

  /** A shadow rule, raised to limit 2, then promoted: versions 1, 2 and 3. */
  async function promotedRule() {
    const tenantId = newTenant();
    const created = await createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS", action: "LOG_ONLY" });
    await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: 2 } });
    const promoted = (await suite.client.data(PromoteRuleDocument, { id: created.id })).promoteRule;
    return { tenantId, created, promoted };
  }

  it("records every change with its version, kind, time, the API key that made it, and the rule before and after", async () => {
    const { created, promoted } = await promotedRule();
    const revisions = await history(created.id);
    expect(revisions.map((r) => [r.version, r.kind, r.actor])).toEqual([
      [1, "CREATED", "bootstrap"],
      [2, "UPDATED", "bootstrap"],
      [3, "UPDATED", "bootstrap"],
    ]);
    expect(revisions[0]).toMatchObject({ ruleId: created.id, before: null, after: created, note: null });
    expect(revisions[1]!.before).toEqual(created);
    expect(revisions[1]!.after).toMatchObject({ limit: 2, version: 2 });
    expect(revisions[2]!.after).toEqual(promoted);
    expect(revisions.map((r) => r.at)).toEqual([created.createdAt, revisions[1]!.after!.updatedAt, promoted.updatedAt]);
  });

  it("promotes a LOG_ONLY rule to REJECT in one mutation, which the history shows", async () => {
    const { created, promoted } = await promotedRule();
    expect(promoted).toMatchObject({ action: "REJECT", version: 3, limit: 2 });
    const last = (await history(created.id)).at(-1)!;
    expect(last).toMatchObject({ note: "promoted from LOG_ONLY to REJECT", before: { action: "LOG_ONLY" }, after: { action: "REJECT" } });
  });

  it("enforces a promoted rule at once: the request the shadow rule let through is now refused", async () => {
    const { tenantId } = await promotedRule();
    const request = { tenantId, userId: `u-${randomUUID()}` };
    expect((await check(suite.client, request)).allowed).toBe(true);
    expect((await check(suite.client, request)).allowed).toBe(true);
    expect(await check(suite.client, request)).toMatchObject({ allowed: false, action: "REJECT" });
  });

  it("promotes to THROTTLE when asked", async () => {
    const created = await createRule(suite.client, { tenantId: newTenant(), name: "shadow", limit: 5, window: 1, action: "LOG_ONLY" });
    const promoted = (await suite.client.data(PromoteRuleDocument, { id: created.id, action: "THROTTLE" })).promoteRule;
    expect(promoted).toMatchObject({ action: "THROTTLE", version: 2 });
  });

  it("refuses to promote a rule that is not LOG_ONLY (CONFLICT), to LOG_ONLY (BAD_USER_INPUT on action), or at another version than expectedVersion (CONFLICT)", async () => {
    const enforcing = await createRule(suite.client, { tenantId: newTenant(), name: "enforcing", limit: 5, window: 1 });
    expectCode((await suite.client.request(PromoteRuleDocument, { id: enforcing.id })).errors, "CONFLICT");
    const shadow = await createRule(suite.client, { tenantId: newTenant(), name: "shadow", limit: 5, window: 1, action: "LOG_ONLY" });
    expectBadUserInput((await suite.client.request(PromoteRuleDocument, { id: shadow.id, action: "LOG_ONLY" })).errors, "action");
    expectCode((await suite.client.request(PromoteRuleDocument, { id: shadow.id, expectedVersion: 7 })).errors, "CONFLICT");
    expect((await history(shadow.id)).map((r) => r.version)).toEqual([1]);
  });

  it("rolls back by writing a new version equal to the old one, and says so in the history", async () => {
    const { created } = await promotedRule();
    const rolledBack = (await suite.client.data(RollbackRuleDocument, { id: created.id, version: 1 })).rollbackRule;
    const { id: _id, version: _version, createdAt: _createdAt, updatedAt: _updatedAt, ...spec } = created;
    expect(rolledBack).toMatchObject({ ...spec, id: created.id, version: 4 });
    expect((await history(created.id)).at(-1)).toMatchObject({ version: 4, kind: "UPDATED", note: "rolled back to version 1", after: rolledBack });
  });

  it("writes nothing when rolling back to what the rule already is", async () => {
    const { created, promoted } = await promotedRule();
    const same = (await suite.client.data(RollbackRuleDocument, { id: created.id, version: 3 })).rollbackRule;
    expect(same).toEqual(promoted);
    expect((await history(created.id)).map((r) => r.version)).toEqual([1, 2, 3]);
  });

  it("answers NOT_FOUND for the history of an unknown rule and for a version it never had", async () => {
    expectCode((await suite.client.request(RuleHistoryDocument, { id: randomUUID() })).errors, "NOT_FOUND");
    const { created } = await promotedRule();
    const unknownVersion = await suite.client.request(RollbackRuleDocument, { id: created.id, version: 9 });
    expectCode(unknownVersion.errors, "NOT_FOUND");
    expect(unknownVersion.errors![0]!.message).toBe(`version 9 of rule "${created.id}" does not exist`);
  });

  it("keeps the history of a deleted rule, ending with the deletion, and rolls it back no more", async () => {
    const { created, promoted } = await promotedRule();
    await suite.client.data(DeleteRuleDocument, { id: created.id });
    const revisions = await history(created.id);
    expect(revisions.map((r) => [r.version, r.kind])).toEqual([
      [1, "CREATED"],
      [2, "UPDATED"],
      [3, "UPDATED"],
      [4, "DELETED"],
    ]);
    expect(revisions[3]).toMatchObject({ before: promoted, after: null });
    expectCode((await suite.client.request(RollbackRuleDocument, { id: created.id, version: 1 })).errors, "NOT_FOUND");
    expectBadUserInput((await suite.client.request(RollbackRuleDocument, { id: created.id, version: 4 })).errors, "version");
  });
});
