/**
 * Attributes through the API and the rules file: a rule that applies only to
 * checks of a plan, a rule keyed per customer per route group, the attributes
 * validated where they enter, and a rules file of both read back unchanged.
 */

import { expect, it } from "vitest";
import { CheckLimitsDocument, CreateRuleDocument, ExportRulesDocument, ImportRulesDocument, UpdateRuleDocument } from "../generated/graphql.js";
import { check, createRule, describeOnEachStorage, expectBadUserInput, newTenant } from "../support/api.js";

function planRules(tenantId: string): string {
  return `rules:
  - tenantId: ${tenantId}
    name: free plan
    scope: [USER]
    when:
      - key: plan
        values: [free]
    limit: 2
    window: 1
    windowUnit: HOURS

  - tenantId: ${tenantId}
    name: per customer per route group
    attributeKeys: [route_group, customer]
    limit: 3
    window: 1
    windowUnit: HOURS
`;
}

await describeOnEachStorage("attributes", (suite) => {
  it("applies a free-plan rule only to checks with plan=free, and keys a rule per customer per route group", async () => {
    const tenantId = newTenant();
    const imported = (await suite.client.data(ImportRulesDocument, { yaml: planRules(tenantId) })).importRules;
    expect(imported.created.map((r) => r.name)).toEqual(["free plan", "per customer per route group"]);
    const free = (plan: string | null, customer = "c1") =>
      check(suite.client, {
        tenantId,
        userId: "u1",
        attributes: [...(plan === null ? [] : [{ key: "plan", value: plan }]), { key: "customer", value: customer }, { key: "route_group", value: "search" }],
      });

    const first = await free("free");
    expect(first.results.map((r) => [r.rule.name, r.key, r.remaining]).sort()).toEqual([
      ["free plan", "user:u1", 1],
      ["per customer per route group", "attr.customer:c1|attr.route_group:search", 2],
    ]);
    await free("free");
    const third = await free("free");
    expect(third.allowed).toBe(false);
    expect(third.rule?.name).toBe("free plan");

    // A pro customer, and a check without a plan, are not on the free plan: only the per-customer rule applies.
    const pro = await free("pro", "c2");
    expect(pro.allowed).toBe(true);
    expect(pro.results.map((r) => r.rule.name)).toEqual(["per customer per route group"]);
    expect((await free(null, "c3")).results.map((r) => r.rule.name)).toEqual(["per customer per route group"]);

    // Without the attributes a rule is keyed by, that rule does not apply.
    expect((await check(suite.client, { tenantId, userId: "u9" })).results).toEqual([]);
  });

  it("exports the attributes and reads the export back as unchanged", async () => {
    const tenantId = newTenant();
    await suite.client.data(ImportRulesDocument, { yaml: planRules(tenantId) });
    const exported = (await suite.client.data(ExportRulesDocument, { tenantId })).exportRules;
    expect(exported).toContain("attributeKeys: [customer, route_group]");
    expect(exported).toContain("      - key: plan\n        values: [free]");
    const again = (await suite.client.data(ImportRulesDocument, { yaml: exported, dryRun: true })).importRules;
    expect(again.unchanged.map((r) => r.name)).toEqual(["free plan", "per customer per route group"]);
    expect([...again.created, ...again.updated, ...again.invalid]).toEqual([]);
  });

  it("reports a rules file's bad condition with its line and field", async () => {
    const tenantId = newTenant();
    const yaml = `rules:\n  - tenantId: ${tenantId}\n    name: x\n    limit: 1\n    window: 1\n    when:\n      - key: plan\n        values: []\n`;
    const result = (await suite.client.data(ImportRulesDocument, { yaml })).importRules;
    expect(result.invalid).toEqual([{ line: 8, column: 17, field: "rules[0].when[0].values", message: "rules[0].when[0].values must be a list of one or more values" }]);
  });

  it("changes a rule's attributes with updateRule", async () => {
    const tenantId = newTenant();
    const rule = await createRule(suite.client, { tenantId, name: "per plan", limit: 5, window: 60, attributeKeys: ["plan"] });
    expect(rule).toMatchObject({ attributeKeys: ["plan"], when: [] });
    const changed = (
      await suite.client.data(UpdateRuleDocument, { id: rule.id, input: { attributeKeys: [], when: [{ key: "region", values: ["us", "eu"] }] } })
    ).updateRule;
    expect(changed).toMatchObject({ version: 2, attributeKeys: [], when: [{ key: "region", values: ["us", "eu"] }] });
    const decision = await check(suite.client, { tenantId, attributes: [{ key: "region", value: "eu" }] });
    expect(decision.results.map((r) => r.key)).toEqual(["*"]);
  });

  it("refuses a bad attribute of a check, naming it, before anything is counted", async () => {
    const tenantId = newTenant();
    const { errors } = await suite.client.request(CheckLimitsDocument, {
      request: { tenantId, attributes: [{ key: "plan", value: "free" }, { key: "plan", value: "pro" }] },
    });
    expectBadUserInput(errors, "request.attributes[1].key");
  });

  it("refuses a rule's bad attribute key, naming it", async () => {
    const { errors } = await suite.client.request(CreateRuleDocument, {
      input: { tenantId: newTenant(), name: "x", limit: 1, window: 1, attributeKeys: ["ok", "not|ok"] },
    });
    expectBadUserInput(errors, "input.attributeKeys[1]");
  });
});
