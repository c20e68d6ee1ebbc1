/**
 * Access lists through the API, on each storage: a deny-listed request is
 * refused before any rule (DENY_LISTED, nothing counted), an allow-listed one
 * is admitted past a rule that would refuse it, deny beats allow, "*" entries
 * apply to every tenant; removal takes effect at once; the history says who
 * added and removed what; validation names the field; access as for rules.
 */

import { expect, it } from "vitest";
import {
  AddListEntryDocument,
  CheckScreenedDocument,
  CreateApiKeyDocument,
  ExportRulesDocument,
  ImportRulesWithListsDocument,
  ListEntriesDocument,
  ListEntryHistoryDocument,
  RemoveListEntryDocument,
  type AddListEntryInput,
  type CheckLimitsInput,
} from "../generated/graphql.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { createRule, describeOnEachStorage, expectBadUserInput, expectCode, newTenant, sleep } from "../support/api.js";

await describeOnEachStorage("access lists", (suite) => {
  const add = async (input: AddListEntryInput) => (await suite.client.data(AddListEntryDocument, { input })).addListEntry;
  const decide = async (request: CheckLimitsInput) => (await suite.client.data(CheckScreenedDocument, { request })).checkLimits;

  async function tenantWithRule(limit: number) {
    const tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "per user", scope: ["USER"], limit, window: 1, windowUnit: "HOURS" });
    return tenantId;
  }

  async function keyOf(tenantId: string, role: "TENANT_ADMIN" | "VIEWER" | "CHECKER") {
    const { secret } = (await suite.client.data(CreateApiKeyDocument, { input: { tenantId, role, name: role.toLowerCase() } })).createApiKey;
    return new GraphQLClient(suite.t.app.url, secret);
  }

  it("refuses a deny-listed IP before any rule, counting nothing, and admits it again once the entry is removed", async () => {
    const tenantId = await tenantWithRule(1);
    const entry = await add({ tenantId, list: "DENY", kind: "IP", value: "10.0.0.0/8", note: "abuse" });
    expect(entry).toMatchObject({ tenantId, list: "DENY", kind: "IP", value: "10.0.0.0/8", note: "abuse", createdBy: "bootstrap" });
    const refused = await decide({ tenantId, userId: "u1", ip: "::ffff:10.9.8.7" });
    expect(refused).toEqual({
      allowed: false,
      source: "SCREENING",
      remaining: null,
      retryAfter: null,
      resetAt: null,
      results: [],
      headers: [],
      reason: { code: "DENY_LISTED", message: `the request's IP address is on the tenant's deny list (entry ${entry.id})`, until: null },
    });
    expect((await suite.client.data(RemoveListEntryDocument, { id: entry.id })).removeListEntry).toBe(true);
    // The refusal counted nothing: the rule's one unit is still there.
    expect(await decide({ tenantId, userId: "u1", ip: "10.9.8.7" })).toMatchObject({ allowed: true, source: "COUNTER_STORE", reason: null, remaining: 0 });
  });

  it("admits an allow-listed user past a rule that refuses it, and lets a deny entry beat the allow entry", async () => {
    const tenantId = await tenantWithRule(1);
    await add({ tenantId, list: "ALLOW", kind: "USER", value: "partner" });
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push(await decide({ tenantId, userId: "partner" }));
    expect(decisions.map((d) => [d.allowed, d.reason?.code, d.results.length])).toEqual([
      [true, "ALLOW_LISTED", 0],
      [true, "ALLOW_LISTED", 0],
      [true, "ALLOW_LISTED", 0],
    ]);
    await add({ tenantId, list: "DENY", kind: "USER_AGENT", value: "*BadBot*" });
    expect((await decide({ tenantId, userId: "partner", userAgent: "Mozilla/5.0 (compatible; badbot/1.0)" })).reason?.code).toBe("DENY_LISTED");
    expect((await decide({ tenantId, userId: "someone" })).allowed).toBe(true);
  });

  it('applies a "*" entry to every tenant, naming no tenant\'s data', async () => {
    const [a, b] = [await tenantWithRule(10), await tenantWithRule(10)];
    const entry = await add({ tenantId: "*", list: "DENY", kind: "API_KEY", value: "sk-leaked-everywhere" });
    expect(entry.value).toMatch(/^sha256:/);
    for (const tenantId of [a, b]) {
      expect((await decide({ tenantId, apiKey: "sk-leaked-everywhere" })).reason).toEqual({
        code: "DENY_LISTED",
        message: `the request's API key is on every tenant's deny list (entry ${entry.id})`,
        until: null,
      });
    }
    await suite.client.data(RemoveListEntryDocument, { id: entry.id });
  });

  it("lists a tenant's entries by list, and keeps who added and removed what in the history", async () => {
    const tenantId = newTenant();
    const denied = await add({ tenantId, list: "DENY", kind: "USER", value: "mallory" });
    const allowed = await add({ tenantId, list: "ALLOW", kind: "IP", value: "2001:DB8::/32" });
    expect(allowed.value).toBe("2001:db8::/32");
    expect((await suite.client.data(ListEntriesDocument, { tenantId, list: "DENY" })).listEntries.map((e) => e.id)).toEqual([denied.id]);
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries.map((e) => e.id)).toEqual([denied.id, allowed.id]);
    await suite.client.data(RemoveListEntryDocument, { id: denied.id });
    const history = (await suite.client.data(ListEntryHistoryDocument, { tenantId })).listEntryHistory;
    expect(history.map((c) => [c.kind, c.entry.id, c.actor])).toEqual([
      ["ADDED", denied.id, "bootstrap"],
      ["ADDED", allowed.id, "bootstrap"],
      ["REMOVED", denied.id, "bootstrap"],
    ]);
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries.map((e) => e.id)).toEqual([allowed.id]);
  });

  it("refuses bad input naming the field, and a value already listed as a conflict", async () => {
    const tenantId = newTenant();
    const attempt = (input: Partial<AddListEntryInput>) => suite.client.request(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "IP", value: "10.0.0.0/8", ...input } });
    expectBadUserInput((await attempt({ value: "10.1.2.3/8" })).errors, "input.value");
    expectBadUserInput((await attempt({ value: "300.1.2.3" })).errors, "input.value");
    expectBadUserInput((await attempt({ tenantId: "" })).errors, "input.tenantId");
    await attempt({});
    expectCode((await attempt({ value: "10.0.0.0/8" })).errors, "CONFLICT");
    expectCode((await suite.client.request(RemoveListEntryDocument, { id: "no-such-entry" })).errors, "NOT_FOUND");
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries).toHaveLength(1);
  });

  it("lets a tenant's admin change its own lists only, a viewer read them, and hides other tenants' entries", async () => {
    const tenantId = newTenant();
    const other = newTenant();
    const theirs = await add({ tenantId: other, list: "DENY", kind: "USER", value: "x" });
    const admin = await keyOf(tenantId, "TENANT_ADMIN");
    const viewer = await keyOf(tenantId, "VIEWER");
    const own = (await admin.data(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "USER", value: "y" } })).addListEntry;
    expect(own.tenantId).toBe(tenantId);
    expectCode((await admin.request(AddListEntryDocument, { input: { tenantId: other, list: "DENY", kind: "USER", value: "z" } })).errors, "FORBIDDEN");
    expectCode((await admin.request(AddListEntryDocument, { input: { tenantId: "*", list: "DENY", kind: "USER", value: "z" } })).errors, "FORBIDDEN");
    expectCode((await admin.request(RemoveListEntryDocument, { id: theirs.id })).errors, "NOT_FOUND");
    expectCode((await admin.request(ListEntriesDocument, { tenantId: other })).errors, "FORBIDDEN");
    expect((await viewer.data(ListEntriesDocument, {})).listEntries.map((e) => e.id)).toEqual([own.id]);
    expectCode((await viewer.request(RemoveListEntryDocument, { id: own.id })).errors, "FORBIDDEN");
    expectCode((await viewer.request(ListEntryHistoryDocument, { tenantId: other })).errors, "FORBIDDEN");
    expect((await suite.client.data(ListEntriesDocument, { tenantId: other })).listEntries.map((e) => e.id)).toEqual([theirs.id]);
  });

  it("imports a rules file's lists (adding what is not listed yet) and exports them, so an export imports back unchanged", async () => {
    const tenantId = newTenant();
    const yaml = `rules: []
lists:
  - {tenantId: ${tenantId}, list: DENY, kind: IP, value: "2001:DB8::/32", note: scanners}
  - {tenantId: ${tenantId}, list: ALLOW, kind: API_KEY, value: sk-partner}
`;
    const importFile = async (text: string, dryRun = false) => (await suite.client.data(ImportRulesWithListsDocument, { yaml: text, dryRun })).importRules;
    expect(await importFile(yaml, true)).toEqual({ applied: false, listEntriesAdded: 2, listEntriesUnchanged: 0, invalid: [] });
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries).toEqual([]);
    expect(await importFile(yaml)).toEqual({ applied: true, listEntriesAdded: 2, listEntriesUnchanged: 0, invalid: [] });
    expect((await decide({ tenantId, ip: "2001:db8::1" })).reason?.code).toBe("DENY_LISTED");
    expect((await decide({ tenantId, apiKey: "sk-partner" })).reason?.code).toBe("ALLOW_LISTED");
    const exported = (await suite.client.data(ExportRulesDocument, { tenantId })).exportRules;
    expect(exported).toContain("value: 2001:db8::/32\n    note: scanners");
    expect(exported).not.toContain("sk-partner");
    expect(await importFile(exported)).toEqual({ applied: true, listEntriesAdded: 0, listEntriesUnchanged: 2, invalid: [] });
    const bad = await importFile(`rules: []\nlists:\n  - {tenantId: ${tenantId}, list: DENY, kind: IP, value: 10.1.2.3/8}\n`);
    expect(bad).toMatchObject({ applied: false, invalid: [{ line: 3, field: "lists[0].value" }] });
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries).toHaveLength(2);
  });

  it("stops applying an entry at its expiry, says when in the decision, and lets the identifier be listed again", async () => {
    const tenantId = await tenantWithRule(100);
    const expiresAt = new Date(Date.now() + 1_500).toISOString();
    const entry = await add({ tenantId, list: "DENY", kind: "USER", value: "cooling-off", expiresAt });
    expect(entry.expiresAt).toBe(expiresAt);
    const refused = await decide({ tenantId, userId: "cooling-off" });
    expect(refused.reason).toMatchObject({ code: "DENY_LISTED", until: expiresAt });
    expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
    while (Date.now() <= Date.parse(expiresAt)) await sleep(50);
    expect(await decide({ tenantId, userId: "cooling-off" })).toMatchObject({ allowed: true, reason: null });
    expect((await suite.client.data(ListEntriesDocument, { tenantId })).listEntries).toEqual([]);
    const again = await add({ tenantId, list: "DENY", kind: "USER", value: "cooling-off" });
    expect((await decide({ tenantId, userId: "cooling-off" })).reason?.code).toBe("DENY_LISTED");
    const history = (await suite.client.data(ListEntryHistoryDocument, { tenantId })).listEntryHistory;
    expect(history.map((c) => [c.kind, c.entry.id])).toEqual([
      ["ADDED", entry.id],
      ["REMOVED", entry.id],
      ["ADDED", again.id],
    ]);
    const past = await suite.client.request(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "USER", value: "x", expiresAt: new Date(Date.now() - 1_000).toISOString() } });
    expectBadUserInput(past.errors, "input.expiresAt");
  });
});
