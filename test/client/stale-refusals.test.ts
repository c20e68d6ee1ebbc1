/**
 * What could make the client's own answers stale, beyond a rule change and a
 * bucket reset: an override that lowered the limit ending by itself (its
 * refusal says to retry when it ends), an allow list entry added (pushed as
 * ALLOW_LISTED), and LOCAL keeping a rule Floodgate no longer applies.
 */

import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { AddListEntryDocument, DeleteRuleDocument, SetOverrideDocument } from "../generated/graphql.js";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, patientClient, untilCacheLive } from "../support/floodgate-clients.js";
import { startTcpProxy } from "../harness/tcp-proxy.js";

const { track, cleanups } = closedAfterEachTest();

await describeOnEachStorage("FloodgateClient, what makes its answers stale", (suite) => {
  const perUser = (tenantId: string, limit: number) =>
    createRule(suite.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit, window: 1, windowUnit: "HOURS" });

  it("the refusal cache stops refusing when the override that lowered the bucket's limit expires", async () => {
    const tenantId = newTenant();
    const rule = await perUser(tenantId, 100);
    const expiresAt = new Date(Date.now() + 2_000).toISOString();
    await suite.client.data(SetOverrideDocument, { input: { ruleId: rule.id, dimension: "USER", identifier: "u1", limit: 1, expiresAt } });
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
    await untilCacheLive(client);
    const request = { tenantId, userId: "u1" };
    expect((await client.check(request)).allowed).toBe(true);
    expect(await client.check(request)).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
    await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 500));
    // The rule's own limit again (100, one used): Floodgate admits, so the client must not refuse from memory.
    expect(await client.check(request)).toMatchObject({ allowed: true });
  });

  it("the refusal cache stops refusing once the caller is put on the ALLOW list", async () => {
    const tenantId = newTenant();
    await perUser(tenantId, 1);
    const client = track(patientClient(suite.t.app.url, await apiKey(suite.client, tenantId)));
    await untilCacheLive(client);
    const request = { tenantId, userId: "u1" };
    expect((await client.check(request)).allowed).toBe(true);
    expect(await client.check(request)).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
    await suite.client.data(AddListEntryDocument, { input: { tenantId, list: "ALLOW", kind: "USER", value: "u1" } });
    // Floodgate admits an allow-listed caller before any rule; the refusal, good for an hour, goes once the push arrives.
    let decision = await client.check(request);
    for (const deadline = Date.now() + 5_000; !decision.allowed && Date.now() < deadline; decision = await client.check(request)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(decision).toMatchObject({ allowed: true, reason: { code: "ALLOW_LISTED" } });
  });

  it("LOCAL does not limit by a rule Floodgate has since stopped applying (deleted)", async () => {
    const tenantId = newTenant();
    const rule = await perUser(tenantId, 1);
    const proxy = await startTcpProxy("127.0.0.1", Number(new URL(suite.t.app.url).port));
    cleanups.push(() => proxy.stop());
    const client = track(patientClient(`http://127.0.0.1:${proxy.port}/graphql`, await apiKey(suite.client, tenantId), { failureMode: "LOCAL", cache: false }));
    expect((await client.check({ tenantId, userId: "u1" })).rule?.id).toBe(rule.id);
    await suite.client.data(DeleteRuleDocument, { id: rule.id });
    // Floodgate's answer since: no rule applies.
    expect(await client.check({ tenantId, userId: "u1" })).toMatchObject({ allowed: true, rule: null, results: [] });
    await proxy.stop();

    const local = [];
    for (let i = 0; i < 3; i++) local.push(await client.check({ tenantId, userId: "u2" }));
    expect(local.map((d) => [d.allowed, d.degraded, d.rule])).toEqual([
      [true, true, null],
      [true, true, null],
      [true, true, null],
    ]);
  });
});
