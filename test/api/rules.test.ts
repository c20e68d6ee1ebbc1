/** Rule management through HTTP: createRule, rule, rules, updateRule, deleteRule, resetLimit. */

import { randomUUID } from "node:crypto";
import { print } from "graphql";
import { describe, expect, it } from "vitest";
import {
  CreateRuleDocument,
  DeleteRuleDocument,
  GetRuleDocument,
  ListRulesDocument,
  ResetLimitDocument,
  UpdateRuleDocument,
  type CreateRuleInput,
  type UpdateRuleInput,
} from "../generated/graphql.js";
import { CONTRACT_RULE_DEFAULTS } from "../support/domain-factory.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { createRule, describeOnEachStorage, expectBadUserInput, expectCode, expectNoStackTrace, newTenant, sleep } from "../support/api.js";

function baseInput(tenantId: string, overrides: Partial<CreateRuleInput> = {}): CreateRuleInput {
  return { tenantId, name: "per-user", scope: ["USER"], limit: 10, window: 1, windowUnit: "MINUTES", ...overrides };
}

async function listRules(client: GraphQLClient, tenantId: string | null) {
  return (await client.data(ListRulesDocument, { tenantId })).rules;
}

async function getRule(client: GraphQLClient, id: string) {
  return (await client.data(GetRuleDocument, { id })).rule;
}

/** Every rule in the app and the tenant's own: what an operation that must change nothing is checked against. */
async function snapshot(client: GraphQLClient, tenantId: string) {
  return { tenant: await listRules(client, tenantId), all: await listRules(client, null) };
}

/** Invalid fields of a new rule, each with the argument path the error must name. */
const INVALID_CREATE: [string, (tenantId: string) => Partial<CreateRuleInput>, string][] = [
  ["limit 0", () => ({ limit: 0 }), "input.limit"],
  ["window 0", () => ({ window: 0 }), "input.window"],
  ["window 367 DAYS", () => ({ window: 367, windowUnit: "DAYS" }), "input.window"],
  ['name ""', () => ({ name: "" }), "input.name"],
  ["a 201-character name", () => ({ name: "n".repeat(201) }), "input.name"],
  ['tenantId ""', () => ({ tenantId: "" }), "input.tenantId"],
  ['resource "api/x" (no leading slash)', () => ({ resource: "api/x" }), "input.resource"],
  ['resource "/a**"', () => ({ resource: "/a**" }), "input.resource"],
  ['method "FETCH"', () => ({ method: "FETCH" }), "input.method"],
  ["burst 0", () => ({ algorithm: "TOKEN_BUCKET", burst: 0 }), "input.burst"],
  ["SLIDING_WINDOW_LOG with limit 200000", () => ({ algorithm: "SLIDING_WINDOW_LOG", limit: 200_000 }), "input.limit"],
];

/** The same mistakes made in an update of an existing rule (a rule's tenant cannot be changed at all). */
const INVALID_UPDATE: [string, UpdateRuleInput, string][] = [
  ["limit 0", { limit: 0 }, "input.limit"],
  ["window 0", { window: 0 }, "input.window"],
  ["window 367 DAYS", { window: 367, windowUnit: "DAYS" }, "input.window"],
  ['name ""', { name: "" }, "input.name"],
  ["a 201-character name", { name: "n".repeat(201) }, "input.name"],
  ['resource "api/x" (no leading slash)', { resource: "api/x" }, "input.resource"],
  ['resource "/a**"', { resource: "/a**" }, "input.resource"],
  ['method "FETCH"', { method: "FETCH" }, "input.method"],
  ["burst 0", { algorithm: "TOKEN_BUCKET", burst: 0 }, "input.burst"],
  ["SLIDING_WINDOW_LOG with limit 200000", { algorithm: "SLIDING_WINDOW_LOG", limit: 200_000 }, "input.limit"],
];

await describeOnEachStorage("rules API over HTTP", (suite) => {
  describe("createRule", () => {
    it("fills in the contract defaults for every optional field", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: "defaults", limit: 10, window: 30 });
      expect(rule).toMatchObject({ tenantId, name: "defaults", limit: 10, window: 30, windowSeconds: 30, version: 1, ...CONTRACT_RULE_DEFAULTS });
      expect(rule.id).not.toBe("");
      expect(rule.updatedAt).toBe(rule.createdAt);
    });

    it("computes windowSeconds from window and unit (2 MINUTES is 120)", async () => {
      const rule = await createRule(suite.client, { tenantId: newTenant(), name: "two-minutes", limit: 10, window: 2, windowUnit: "MINUTES" });
      expect(rule.windowSeconds).toBe(120);
    });

    it("keeps every field it is given", async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, {
        tenantId,
        name: "orders",
        scope: ["IP", "USER"],
        resource: "/api/v1/orders/**",
        method: "post",
        algorithm: "TOKEN_BUCKET",
        limit: 7,
        window: 3,
        windowUnit: "HOURS",
        burst: 9,
        action: "THROTTLE",
        failureMode: "CLOSED",
        priority: -3,
        enabled: false,
      });
      expect(rule).toMatchObject({
        tenantId,
        name: "orders",
        resource: "/api/v1/orders/**",
        method: "POST",
        algorithm: "TOKEN_BUCKET",
        limit: 7,
        window: 3,
        windowUnit: "HOURS",
        windowSeconds: 3 * 3600,
        burst: 9,
        action: "THROTTLE",
        failureMode: "CLOSED",
        priority: -3,
        enabled: false,
      });
      expect([...rule.scope].sort()).toEqual(["IP", "USER"]);
    });

    it("refuses a second rule of the same name in a tenant with CONFLICT and keeps the first", async () => {
      const tenantId = newTenant();
      const first = await createRule(suite.client, baseInput(tenantId, { name: "dup" }));
      const response = await suite.client.request(CreateRuleDocument, { input: baseInput(tenantId, { name: "dup", limit: 99 }) });
      expectCode(response.errors, "CONFLICT");
      expectNoStackTrace(response);
      expect(await listRules(suite.client, tenantId)).toEqual([first]);
    });

    it("allows the same name in another tenant", async () => {
      await createRule(suite.client, baseInput(newTenant(), { name: "shared-name" }));
      const other = await createRule(suite.client, baseInput(newTenant(), { name: "shared-name" }));
      expect(other.name).toBe("shared-name");
    });
  });

  describe("rule and rules", () => {
    it("rule(id) reads back the created rule", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      expect(await getRule(suite.client, created.id)).toEqual(created);
    });

    it("rule(id) of an unknown id is null", async () => {
      expect(await getRule(suite.client, randomUUID())).toBeNull();
    });

    it("rules(tenantId) returns that tenant's rules and no other tenant's", async () => {
      const tenantId = newTenant();
      const a = await createRule(suite.client, baseInput(tenantId, { name: "a" }));
      const b = await createRule(suite.client, baseInput(tenantId, { name: "b" }));
      const foreign = await createRule(suite.client, baseInput(newTenant(), { name: "a" }));
      const listed = await listRules(suite.client, tenantId);
      expect(listed).toEqual([a, b]);
      expect(listed.map((r) => r.id)).not.toContain(foreign.id);
    });

    it("rules() without a tenant lists the rules of every tenant", async () => {
      const a = await createRule(suite.client, baseInput(newTenant()));
      const b = await createRule(suite.client, baseInput(newTenant()));
      const ids = (await listRules(suite.client, null)).map((r) => r.id);
      expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
    });
  });

  describe("updateRule", () => {
    it("changes the given fields and leaves the others as they were", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const { updateRule } = await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: 20, priority: 5, method: "GET" } });
      expect(updateRule).toMatchObject({ ...created, limit: 20, priority: 5, method: "GET", version: 2, updatedAt: updateRule.updatedAt });
      expect(await getRule(suite.client, created.id)).toEqual(updateRule);
    });

    it("bumps the version by exactly one on each change", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const versions: number[] = [];
      for (const limit of [11, 12, 13]) {
        versions.push((await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit } })).updateRule.version);
      }
      expect(versions).toEqual([2, 3, 4]);
    });

    it("keeps createdAt and moves updatedAt forward", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      // Only so that the clock has ticked past the creation's millisecond; nothing is timed.
      while (Date.now() <= Date.parse(created.updatedAt)) await sleep(1);
      const { updateRule } = await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: 11 } });
      expect(updateRule.createdAt).toBe(created.createdAt);
      expect(Date.parse(updateRule.updatedAt)).toBeGreaterThan(Date.parse(created.updatedAt));
    });

    it("keeps the version (and updatedAt) when the update changes nothing", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const same = await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: created.limit, name: created.name } });
      const empty = await suite.client.data(UpdateRuleDocument, { id: created.id, input: {} });
      expect(same.updateRule).toEqual(created);
      expect(empty.updateRule).toEqual(created);
      expect(await getRule(suite.client, created.id)).toEqual(created);
    });

    it("fails with CONFLICT on a stale expectedVersion and leaves the rule unchanged", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const current = (await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: 11 } })).updateRule;
      const response = await suite.client.request(UpdateRuleDocument, { id: created.id, input: { limit: 50 }, expectedVersion: 1 });
      expectCode(response.errors, "CONFLICT");
      expectNoStackTrace(response);
      expect(await getRule(suite.client, created.id)).toEqual(current);
    });

    it("succeeds with the rule's current expectedVersion", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const { updateRule } = await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit: 50 }, expectedVersion: 1 });
      expect(updateRule).toMatchObject({ limit: 50, version: 2 });
    });

    it("of two concurrent updates with the same expectedVersion, exactly one succeeds and the other gets CONFLICT", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const responses = await Promise.all(
        [21, 22].map((limit) => suite.client.request(UpdateRuleDocument, { id: created.id, input: { limit }, expectedVersion: 1 })),
      );
      const winners = responses.filter((r) => r.data?.updateRule);
      const losers = responses.filter((r) => r.errors);
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(1);
      expectCode(losers[0]!.errors, "CONFLICT");
      expect(await getRule(suite.client, created.id)).toEqual(winners[0]!.data!.updateRule);
      expect(winners[0]!.data!.updateRule.version).toBe(2);
    });

    it("applies concurrent updates without expectedVersion one after the other, each with its own version", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      const updated = await Promise.all(
        [21, 22, 23].map(async (limit) => (await suite.client.data(UpdateRuleDocument, { id: created.id, input: { limit } })).updateRule),
      );
      expect(updated.map((r) => r.version).sort()).toEqual([2, 3, 4]);
      const last = updated.find((r) => r.version === 4)!;
      expect(await getRule(suite.client, created.id)).toEqual(last);
    });

    it("fails with CONFLICT when renaming to another rule's name in the tenant, and changes nothing", async () => {
      const tenantId = newTenant();
      await createRule(suite.client, baseInput(tenantId, { name: "taken" }));
      const other = await createRule(suite.client, baseInput(tenantId, { name: "other" }));
      const response = await suite.client.request(UpdateRuleDocument, { id: other.id, input: { name: "taken", limit: 3 } });
      expectCode(response.errors, "CONFLICT");
      expectNoStackTrace(response);
      expect(await getRule(suite.client, other.id)).toEqual(other);
    });

    it("fails with NOT_FOUND for an unknown id", async () => {
      const response = await suite.client.request(UpdateRuleDocument, { id: randomUUID(), input: { limit: 5 } });
      expectCode(response.errors, "NOT_FOUND");
      expectNoStackTrace(response);
    });
  });

  describe("deleteRule and resetLimit", () => {
    it("deleteRule returns true, and the rule is gone from rule(id) and rules(tenantId)", async () => {
      const tenantId = newTenant();
      const created = await createRule(suite.client, baseInput(tenantId));
      expect((await suite.client.data(DeleteRuleDocument, { id: created.id })).deleteRule).toBe(true);
      expect(await getRule(suite.client, created.id)).toBeNull();
      expect(await listRules(suite.client, tenantId)).toEqual([]);
    });

    it("deleteRule fails with NOT_FOUND for an unknown id", async () => {
      const response = await suite.client.request(DeleteRuleDocument, { id: randomUUID() });
      expectCode(response.errors, "NOT_FOUND");
      expectNoStackTrace(response);
    });

    it("deleteRule of an already deleted rule fails with NOT_FOUND", async () => {
      const created = await createRule(suite.client, baseInput(newTenant()));
      await suite.client.data(DeleteRuleDocument, { id: created.id });
      expectCode((await suite.client.request(DeleteRuleDocument, { id: created.id })).errors, "NOT_FOUND");
    });

    it("resetLimit fails with NOT_FOUND for an unknown rule id", async () => {
      const response = await suite.client.request(ResetLimitDocument, { ruleId: randomUUID(), key: "user:u1" });
      expectCode(response.errors, "NOT_FOUND");
      expectNoStackTrace(response);
    });
  });

  describe("validation", () => {
    it.each(INVALID_CREATE)("createRule with %s fails with BAD_USER_INPUT naming the field and creates nothing", async (_, invalid, field) => {
      const tenantId = newTenant();
      await createRule(suite.client, baseInput(tenantId, { name: "existing" }));
      const before = await snapshot(suite.client, tenantId);
      const response = await suite.client.request(CreateRuleDocument, { input: baseInput(tenantId, { name: "new", ...invalid(tenantId) }) });
      expect(response.data).toBeNull();
      expectBadUserInput(response.errors, field);
      expectNoStackTrace(response);
      expect(await snapshot(suite.client, tenantId)).toEqual(before);
    });

    it.each(INVALID_UPDATE)("updateRule with %s fails with BAD_USER_INPUT naming the field and changes nothing", async (_, invalid, field) => {
      const tenantId = newTenant();
      const existing = await createRule(suite.client, baseInput(tenantId));
      const before = await snapshot(suite.client, tenantId);
      const response = await suite.client.request(UpdateRuleDocument, { id: existing.id, input: invalid });
      expect(response.data).toBeNull();
      expectBadUserInput(response.errors, field);
      expectNoStackTrace(response);
      expect(await snapshot(suite.client, tenantId)).toEqual(before);
      expect(await getRule(suite.client, existing.id)).toEqual(existing);
    });

    it("a tenantId of only spaces is refused as input.tenantId", async () => {
      const response = await suite.client.request(CreateRuleDocument, { input: baseInput("   ") });
      expectBadUserInput(response.errors, "input.tenantId");
      expect(await listRules(suite.client, "   ")).toEqual([]);
    });

    it.each([
      ['a string limit ("abc")', "abc"],
      ["a limit of 2^31 (beyond Int)", 2 ** 31],
    ])("%s in variables is refused by the GraphQL layer with BAD_USER_INPUT and creates nothing", async (_, limit) => {
      const tenantId = newTenant();
      const before = await snapshot(suite.client, tenantId);
      const response = await suite.client.raw({ query: print(CreateRuleDocument), variables: { input: { ...baseInput(tenantId), limit } } });
      expect(response.status).toBe(400);
      expect(response.data ?? null).toBeNull();
      const error = response.errors?.[0];
      expect(error?.extensions?.code).toBe("BAD_USER_INPUT");
      expect(error?.message).toContain("limit");
      expectNoStackTrace(response);
      expect(await snapshot(suite.client, tenantId)).toEqual(before);
    });

    it("a limit of 2^31 in an update's variables is refused with BAD_USER_INPUT and changes nothing", async () => {
      const existing = await createRule(suite.client, baseInput(newTenant()));
      const response = await suite.client.raw({ query: print(UpdateRuleDocument), variables: { id: existing.id, input: { limit: 2 ** 31 } } });
      expect(response.status).toBe(400);
      expect(response.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
      expectNoStackTrace(response);
      expect(await getRule(suite.client, existing.id)).toEqual(existing);
    });
  });
});
