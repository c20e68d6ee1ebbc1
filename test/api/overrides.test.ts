/**
 * Overrides through the API: a "pro" customer gets its override's limit while
 * everyone else gets the rule's; a raised override takes effect at once,
 * over-limit cache and all; an expired or deleted override stops applying;
 * each change is a revision of its rule; pages; validation and access.
 */

import { expect, it } from "vitest";
import {
  CheckWithOverrideDocument,
  CreateApiKeyDocument,
  DeleteOverrideDocument,
  ExportRulesDocument,
  ImportRulesDocument,
  OverrideHistoryDocument,
  OverridesDocument,
  SetOverrideDocument,
  type CheckLimitsInput,
  type SetOverrideInput,
} from "../generated/graphql.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { partitionKey } from "../../src/engine/decision/headers.js";
import { createRule, describeOnEachStorage, expectBadUserInput, expectCode, header, newTenant, sleep } from "../support/api.js";

await describeOnEachStorage("overrides", (suite) => {
  const decide = async (request: CheckLimitsInput) => (await suite.client.data(CheckWithOverrideDocument, { request })).checkLimits;
  const setOverride = async (input: SetOverrideInput) => (await suite.client.data(SetOverrideDocument, { input })).setOverride;

  async function perCustomer(limit: number) {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId, name: "per customer", attributeKeys: ["customer"], limit, window: 1, windowUnit: "HOURS" });
    const of = (customer: string): CheckLimitsInput => ({ tenantId, attributes: [{ key: "customer", value: customer }] });
    return { tenantId, rule, of };
  }

  it("gives a pro customer its override's limit while everyone else gets the rule's, and names the override", async () => {
    const { rule, of } = await perCustomer(2);
    const pro = await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "pro-co", limit: 5, note: "pro plan" });
    expect(pro).toMatchObject({ ruleId: rule.id, attributeKey: "customer", dimension: null, match: "EXACT", identifier: "pro-co", limit: 5, note: "pro plan", version: 2 });

    const proDecisions = [];
    for (let i = 0; i < 6; i++) proDecisions.push(await decide(of("pro-co")));
    expect(proDecisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
    expect(proDecisions[0]!.results).toEqual([{ key: "attr.customer:pro-co", limit: 5, override: { id: pro.id, identifier: "pro-co" } }]);
    expect(header(proDecisions[0]!.headers, "RateLimit-Policy")).toBe(`"per customer";q=5;w=3600;pk=${partitionKey("attr.customer:pro-co")}`);

    const others = [];
    for (let i = 0; i < 3; i++) others.push(await decide(of("free-co")));
    expect(others.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(others[0]!.results).toEqual([{ key: "attr.customer:free-co", limit: 2, override: null }]);
  });

  it("tells when a token bucket under an override has its next unit at the override's rate, not the rule's", async () => {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId, name: "tb", attributeKeys: ["customer"], algorithm: "TOKEN_BUCKET", limit: 100, window: 1, windowUnit: "HOURS" });
    await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "slow-co", limit: 2 });
    const decision = await decide({ tenantId, attributes: [{ key: "customer", value: "slow-co" }] });
    // One of two tokens left, refilled at 2 an hour: the next in 1,800 s (the rule's 100 an hour would say 36).
    expect(header(decision.headers, "RateLimit")).toBe(`"tb";r=1;t=1800;pk=${partitionKey("attr.customer:slow-co")}`);
  });

  it("matches globs and CIDR blocks, the most specific first, and an exact identifier before either", async () => {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId, name: "per user and ip", scope: ["USER", "IP"], limit: 1, window: 1, windowUnit: "HOURS" });
    await setOverride({ ruleId: rule.id, dimension: "USER", match: "GLOB", identifier: "*@acme.com", limit: 10 });
    await setOverride({ ruleId: rule.id, dimension: "USER", match: "GLOB", identifier: "*@eu.acme.com", limit: 20 });
    await setOverride({ ruleId: rule.id, dimension: "IP", match: "CIDR", identifier: "10.0.0.0/8", limit: 30 });
    await setOverride({ ruleId: rule.id, dimension: "IP", identifier: "10.0.0.9", limit: 40 });
    const limitOf = async (userId: string, ip: string) => (await decide({ tenantId, userId, ip, dryRun: true })).results[0]!.limit;
    expect(await limitOf("bob@eu.acme.com", "192.168.0.1")).toBe(20);
    expect(await limitOf("bob@acme.com", "192.168.0.1")).toBe(10);
    expect(await limitOf("bob@example.com", "10.1.2.3")).toBe(30);
    // Exact on IP beats the glob on USER: exact overrides come first, whatever the dimension.
    expect(await limitOf("bob@acme.com", "10.0.0.9")).toBe(40);
    expect(await limitOf("bob@example.com", "192.168.0.1")).toBe(1);
  });

  it("takes effect at once when raised, though the over-limit cache was refusing the bucket", async () => {
    const { rule, of } = await perCustomer(1);
    await decide(of("c1"));
    expect(await decide(of("c1"))).toMatchObject({ allowed: false });
    expect(await decide(of("c1"))).toMatchObject({ allowed: false, source: "OVER_LIMIT_CACHE" });
    await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 3 });
    expect(await decide(of("c1"))).toMatchObject({ allowed: true, source: "COUNTER_STORE", limit: 3, remaining: 1 });
  });

  it("stops applying when it expires, without any change being made", async () => {
    const { rule, of } = await perCustomer(1);
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 9, expiresAt });
    expect((await decide({ ...of("c1"), dryRun: true })).limit).toBe(9);
    const deadline = Date.parse(expiresAt) + 1000;
    let limit = 9;
    while (limit === 9 && Date.now() < deadline) {
      await sleep(20);
      limit = (await decide({ ...of("c1"), dryRun: true })).limit!;
    }
    expect(limit).toBe(1);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
  });

  it("tells a caller refused under an override that ends sooner to retry when it ends, from the store and from the over-limit cache", async () => {
    const { rule, of } = await perCustomer(100);
    // Refused under the override's 1 an hour, the bucket would wait an hour; the override ends in 30 s, and with it the limit of 1.
    const endsInMs = 30_000;
    await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 1, expiresAt: new Date(Date.now() + endsInMs).toISOString() });
    expect(await decide(of("c1"))).toMatchObject({ allowed: true });
    const refusals = [await decide(of("c1")), await decide(of("c1"))];
    expect(refusals.map((d) => [d.allowed, d.source])).toEqual([
      [false, "COUNTER_STORE"],
      [false, "OVER_LIMIT_CACHE"],
    ]);
    for (const refused of refusals) {
      expect(refused.retryAfter).toBeGreaterThan(endsInMs / 1000 - 5);
      expect(refused.retryAfter).toBeLessThanOrEqual(endsInMs / 1000);
      expect(header(refused.headers, "Retry-After")).toBe(String(refused.retryAfter));
      expect(header(refused.headers, "RateLimit")).toBe(`"per customer";r=0;t=${refused.retryAfter};pk=${partitionKey("attr.customer:c1")}`);
    }
    // Without an end, the refusal's own wait: an hour.
    const { rule: plain, of: plainOf } = await perCustomer(100);
    await setOverride({ ruleId: plain.id, attributeKey: "customer", identifier: "c1", limit: 1 });
    await decide(plainOf("c1"));
    expect((await decide(plainOf("c1"))).retryAfter).toBeGreaterThan(3_500);
  });

  it("stops applying once deleted, and keeps every change in the rule's history", async () => {
    const { rule, of } = await perCustomer(1);
    const first = await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 4 });
    const again = await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 6 });
    expect(again.id).toBe(first.id);
    expect((await decide({ ...of("c1"), dryRun: true })).limit).toBe(6);
    expect((await suite.client.data(DeleteOverrideDocument, { id: first.id })).deleteOverride).toBe(true);
    expect((await decide({ ...of("c1"), dryRun: true })).results[0]).toMatchObject({ limit: 1, override: null });
    const history = (await suite.client.data(OverrideHistoryDocument, { id: rule.id })).ruleHistory;
    expect(history.map((r) => [r.version, r.note, r.override?.before?.limit ?? null, r.override?.after?.limit ?? null])).toEqual([
      [1, null, null, null],
      [2, 'override set: attribute customer exact "c1", limit 4', null, 4],
      [3, 'override set: attribute customer exact "c1", limit 6', 4, 6],
      [4, 'override deleted: attribute customer exact "c1", limit 6', 6, null],
    ]);
    const { errors } = await suite.client.request(DeleteOverrideDocument, { id: first.id });
    expectCode(errors, "NOT_FOUND");
  });

  it("lists a rule's overrides page by page", async () => {
    const { rule } = await perCustomer(1);
    for (let i = 0; i < 5; i++) await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: `c${i}`, limit: 10 + i });
    const first = (await suite.client.data(OverridesDocument, { ruleId: rule.id, first: 3 })).overrides;
    expect(first.items).toHaveLength(3);
    expect(first.hasNextPage).toBe(true);
    const rest = (await suite.client.data(OverridesDocument, { ruleId: rule.id, first: 3, after: first.endCursor })).overrides;
    expect(rest).toMatchObject({ hasNextPage: false, endCursor: null });
    expect([...first.items, ...rest.items].map((o) => o.identifier).sort()).toEqual(["c0", "c1", "c2", "c3", "c4"]);
  });

  it("refuses an override of what the rule is not keyed by, naming the field", async () => {
    const { rule } = await perCustomer(1);
    const { errors } = await suite.client.request(SetOverrideDocument, { input: { ruleId: rule.id, dimension: "USER", identifier: "u1", limit: 5 } });
    expectBadUserInput(errors, "input.dimension");
    const glob = await suite.client.request(SetOverrideDocument, { input: { ruleId: rule.id, attributeKey: "customer", match: "CIDR", identifier: "10.0.0.0/8", limit: 5 } });
    expectBadUserInput(glob.errors, "input.identifier");
  });

  it("reads overrides from a rules file, writes them back to one that imports unchanged, and deletes those a rule's entry leaves out", async () => {
    const tenantId = newTenant();
    const file = (overrides: string) => `rules:
  - tenantId: ${tenantId}
    name: per customer
    attributeKeys: [customer]
    limit: 2
    window: 1
    windowUnit: HOURS
${overrides}`;
    const withPro = file(`    overrides:
      - attributeKey: customer
        identifier: pro-co
        limit: 5
        note: pro plan
      - attributeKey: customer
        match: GLOB
        identifier: "*-trial"
        limit: 1
`);
    const imported = (await suite.client.data(ImportRulesDocument, { yaml: withPro })).importRules;
    expect(imported.created.map((r) => r.name)).toEqual(["per customer"]);
    const of = (customer: string): CheckLimitsInput => ({ tenantId, attributes: [{ key: "customer", value: customer }], dryRun: true });
    expect((await decide(of("pro-co"))).results[0]).toMatchObject({ limit: 5, override: { identifier: "pro-co" } });
    expect((await decide(of("acme-trial"))).results[0]).toMatchObject({ limit: 1, override: { identifier: "*-trial" } });
    expect((await decide(of("other"))).results[0]).toMatchObject({ limit: 2, override: null });

    const exported = (await suite.client.data(ExportRulesDocument, { tenantId })).exportRules;
    expect(exported).toContain(`    overrides:
      - attributeKey: customer
        identifier: pro-co
        limit: 5
        note: pro plan
      - attributeKey: customer
        match: GLOB
        identifier: "*-trial"
        limit: 1
`);
    const again = (await suite.client.data(ImportRulesDocument, { yaml: exported, dryRun: true })).importRules;
    expect(again.unchanged.map((r) => r.name)).toEqual(["per customer"]);

    // The entry without overrides leaves them alone; with `overrides: []` it deletes them.
    expect((await suite.client.data(ImportRulesDocument, { yaml: file("") })).importRules.unchanged).toHaveLength(1);
    expect((await decide(of("pro-co"))).results[0]!.limit).toBe(5);
    expect((await suite.client.data(ImportRulesDocument, { yaml: file("    overrides: []\n") })).importRules.updated).toHaveLength(1);
    expect((await decide(of("pro-co"))).results[0]).toMatchObject({ limit: 2, override: null });
  });

  it("reports a rules file's bad override with its line and field, and writes nothing", async () => {
    const tenantId = newTenant();
    const yaml = `rules:\n  - tenantId: ${tenantId}\n    name: x\n    scope: [USER]\n    limit: 1\n    window: 1\n    overrides:\n      - dimension: IP\n        identifier: 10.0.0.1\n        limit: 5\n`;
    const result = (await suite.client.data(ImportRulesDocument, { yaml })).importRules;
    expect(result).toMatchObject({ applied: false, created: [] });
    expect(result.invalid).toEqual([
      { line: 8, column: 20, field: "rules[0].overrides[0].dimension", message: "rules[0].overrides[0].dimension IP is not what the rule's buckets are keyed by: USER" },
    ]);
  });

  it("on a \"*\" rule names a tenant, set by an ADMIN only; a dry run sees it and counts nothing; a LOG_ONLY rule's override only changes what it reports", async () => {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId: "*", name: `every tenant ${tenantId}`, scope: ["TENANT"], resource: `/${tenantId}`, limit: 1, window: 1, windowUnit: "HOURS", action: "LOG_ONLY" });
    await setOverride({ ruleId: rule.id, dimension: "TENANT", identifier: tenantId, limit: 2 });
    const request = { tenantId, resource: `/${tenantId}` };
    expect((await decide({ ...request, dryRun: true })).results[0]).toMatchObject({ key: `tenant:${tenantId}`, limit: 2 });
    expect((await decide({ ...request, dryRun: true })).results[0]).toMatchObject({ limit: 2 });
    const counted = [await decide(request), await decide(request), await decide(request)];
    // Shadow mode: every request goes through; the dry runs counted nothing, and the override's limit of 2 is what is spent.
    expect(counted.map((d) => d.allowed)).toEqual([true, true, true]);
    expect(counted.map((d) => [d.limit, d.remaining])).toEqual([
      [2, 1],
      [2, 0],
      [2, 0],
    ]);
    const { secret } = (await suite.client.data(CreateApiKeyDocument, { input: { tenantId, role: "TENANT_ADMIN", name: "own" } })).createApiKey;
    const tenantAdmin = new GraphQLClient(suite.t.app.url, secret);
    expectCode((await tenantAdmin.request(SetOverrideDocument, { input: { ruleId: rule.id, dimension: "TENANT", identifier: tenantId, limit: 100 } })).errors, "FORBIDDEN");
  });

  it("hides another tenant's rules and overrides: NOT_FOUND, as for ids that do not exist", async () => {
    const { rule } = await perCustomer(1);
    const override = await setOverride({ ruleId: rule.id, attributeKey: "customer", identifier: "c1", limit: 5 });
    const other = newTenant();
    const { secret } = (await suite.client.data(CreateApiKeyDocument, { input: { tenantId: other, role: "TENANT_ADMIN", name: "other" } })).createApiKey;
    const outsider = new GraphQLClient(suite.t.app.url, secret);
    expectCode((await outsider.request(SetOverrideDocument, { input: { ruleId: rule.id, attributeKey: "customer", identifier: "c2", limit: 5 } })).errors, "NOT_FOUND");
    expectCode((await outsider.request(DeleteOverrideDocument, { id: override.id })).errors, "NOT_FOUND");
    expectCode((await outsider.request(OverridesDocument, { ruleId: rule.id })).errors, "NOT_FOUND");
  });
});
