/**
 * The invalidations subscription, which the client's refusal cache listens
 * to: a CHECKER of tenant A hears, in order, LISTENING first, then its
 * tenant's rule changes and bucket resets, the changes of "*" rules, and of
 * a "*" rule's buckets only A's own and the rule's one shared bucket: never
 * another tenant's key; and the entries added to A's and "*"'s allow lists.
 */

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import {
  AddListEntryDocument,
  CreateApiKeyDocument,
  DeleteRuleDocument,
  InvalidationsDocument,
  RemoveListEntryDocument,
  ResetLimitDocument,
  UpdateRuleDocument,
  type InvalidationsSubscription,
} from "../generated/graphql.js";
import { subscribe } from "../support/subscriptions.js";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";

type Invalidation = InvalidationsSubscription["invalidations"];

await describeOnEachStorage("invalidations", (suite) => {
  it("tells a CHECKER of tenant A of A's rules and buckets and of \"*\" rules, and of a \"*\" rule's buckets only A's", async () => {
    const a = newTenant();
    const b = newTenant();
    const { createApiKey } = await suite.client.data(CreateApiKeyDocument, { input: { tenantId: a, role: "CHECKER", name: "client" } });
    const own = await createRule(suite.client, { tenantId: a, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
    const resource = `/invalidations-${randomUUID()}/**`;
    const global = await createRule(suite.client, { tenantId: "*", name: `global-${randomUUID()}`, scope: ["USER"], resource, limit: 5, window: 1, windowUnit: "MINUTES" });
    const shared = await createRule(suite.client, { tenantId: "*", name: `shared-${randomUUID()}`, resource, limit: 5, window: 1, windowUnit: "MINUTES" });
    const theirs = await createRule(suite.client, { tenantId: b, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
    const sub = subscribe(suite.t.app.url, InvalidationsDocument, {}, createApiKey.secret);
    try {
      await sub.until((events) => events.some((e) => e.invalidations.kind === "LISTENING"));
      const reset = (ruleId: string, key: string) => suite.client.data(ResetLimitDocument, { ruleId, key });
      await reset(global.id, `tenant:${b}|user:u1`);
      await reset(theirs.id, "user:u1");
      await suite.client.data(UpdateRuleDocument, { id: theirs.id, input: { limit: 6 } });
      await reset(global.id, `tenant:${a}|user:u1`);
      await reset(shared.id, "*");
      await reset(own.id, "user:u1");
      await suite.client.data(UpdateRuleDocument, { id: global.id, input: { limit: 6 } });
      await suite.client.data(DeleteRuleDocument, { id: own.id });
      const events = await sub.until((received) => received.filter((e) => e.invalidations.kind !== "LISTENING").length >= 5);
      const seen = events.map(({ invalidations: e }): Partial<Invalidation> => ({ kind: e.kind, tenantId: e.tenantId, ruleId: e.ruleId, key: e.key }));
      expect(seen).toEqual([
        { kind: "LISTENING", tenantId: null, ruleId: null, key: null },
        { kind: "BUCKET_RESET", tenantId: "*", ruleId: global.id, key: `tenant:${a}|user:u1` },
        { kind: "BUCKET_RESET", tenantId: "*", ruleId: shared.id, key: "*" },
        { kind: "BUCKET_RESET", tenantId: a, ruleId: own.id, key: "user:u1" },
        { kind: "RULE_CHANGED", tenantId: "*", ruleId: global.id, key: null },
        { kind: "RULE_CHANGED", tenantId: a, ruleId: own.id, key: null },
      ]);
      expect(JSON.stringify(events)).not.toContain(b);
    } finally {
      await sub.close();
      await suite.client.data(DeleteRuleDocument, { id: global.id });
      await suite.client.data(DeleteRuleDocument, { id: shared.id });
    }
  });

  it("tells a CHECKER of tenant A of entries added to A's and \"*\"'s allow lists, not of deny entries, removals or another tenant's", async () => {
    const a = newTenant();
    const b = newTenant();
    const { createApiKey } = await suite.client.data(CreateApiKeyDocument, { input: { tenantId: a, role: "CHECKER", name: "client" } });
    const sub = subscribe(suite.t.app.url, InvalidationsDocument, {}, createApiKey.secret);
    const added: string[] = [];
    try {
      await sub.until((events) => events.some((e) => e.invalidations.kind === "LISTENING"));
      const add = async (tenantId: string, list: "ALLOW" | "DENY", value: string) => {
        const { addListEntry } = await suite.client.data(AddListEntryDocument, { input: { tenantId, list, kind: "USER", value } });
        added.push(addListEntry.id);
        return addListEntry.id;
      };
      await add(b, "ALLOW", "u1");
      await add(a, "DENY", "u2");
      const allowed = await add(a, "ALLOW", "u3");
      await suite.client.data(RemoveListEntryDocument, { id: allowed });
      await add("*", "ALLOW", `everywhere-${randomUUID()}`);
      const events = await sub.until((received) => received.filter((e) => e.invalidations.kind !== "LISTENING").length >= 2);
      const seen = events.map(({ invalidations: e }): Partial<Invalidation> => ({ kind: e.kind, tenantId: e.tenantId, ruleId: e.ruleId, key: e.key }));
      expect(seen).toEqual([
        { kind: "LISTENING", tenantId: null, ruleId: null, key: null },
        { kind: "ALLOW_LISTED", tenantId: a, ruleId: null, key: null },
        { kind: "ALLOW_LISTED", tenantId: "*", ruleId: null, key: null },
      ]);
      expect(JSON.stringify(events)).not.toContain(b);
    } finally {
      await sub.close();
      for (const id of added) await suite.client.request(RemoveListEntryDocument, { id });
    }
  });

  it("refuses a VIEWER, which may not check limits (FORBIDDEN)", async () => {
    const tenantId = newTenant();
    const { createApiKey } = await suite.client.data(CreateApiKeyDocument, { input: { tenantId, role: "VIEWER", name: "dashboard" } });
    const sub = subscribe(suite.t.app.url, InvalidationsDocument, {}, createApiKey.secret);
    try {
      await expect(sub.until(() => false, 5000)).rejects.toThrow(/FORBIDDEN/);
      expect(sub.received).toEqual([]);
    } finally {
      await sub.close();
    }
  });
});
