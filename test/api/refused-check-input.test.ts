/**
 * What a check operation with refused input answers and counts: the caller's
 * bad input is BAD_USER_INPUT naming the argument, even where graphql itself
 * refuses it as the field runs (a nullable variable with a default, sent as
 * null), and counts nothing at all, not even the operation's other check
 * fields: its root fields are non-null, so the operation has no data and
 * the caller sees none of their decisions. The fast path's own test
 * (check-fast-path.test.ts) holds both paths to the same answers and counts.
 */

import { beforeAll, expect, it } from "vitest";
import { createRule, describeOnEachStorage, expectNoStackTrace, newTenant } from "../support/api.js";

const READ = "query Read($r: CheckLimitsInput!) { checkLimits(request: $r) { remaining } }";

await describeOnEachStorage("refused check input", (suite) => {
  let tenantId: string;

  beforeAll(async () => {
    tenantId = newTenant();
    await createRule(suite.client, { tenantId, name: "per user", scope: ["USER"], limit: 5, window: 60 });
  });

  async function remainingOf(userId: string): Promise<number> {
    const { data, errors } = await suite.client.raw<{ checkLimits: { remaining: number } }>({ query: READ, variables: { r: { tenantId, userId, dryRun: true } } });
    expect(errors).toBeUndefined();
    // A dry run of cost 1 reports what would be left after it: 4 for an untouched bucket of 5.
    return data!.checkLimits.remaining;
  }

  it("answers an explicit null for a defaulted variable in the request argument as BAD_USER_INPUT naming the argument, not as an internal error", async () => {
    const query = `query Q($r: CheckLimitsInput = {tenantId: "${tenantId}", userId: "null-arg"}) { checkLimits(request: $r) { allowed } }`;
    const response = await suite.client.raw({ query, variables: { r: null } });
    expectNoStackTrace(response);
    expect(response.data ?? null).toBeNull();
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]!.extensions?.code).toBe("BAD_USER_INPUT");
    expect(response.errors![0]!.extensions?.field).toBe("request");
    expect(response.errors![0]!.message).toContain("request");
    const batch = `query Q($rs: [CheckLimitsInput!] = [{tenantId: "${tenantId}", userId: "null-arg"}]) { checkLimitsBatch(requests: $rs) { allowed } }`;
    const batchResponse = await suite.client.raw({ query: batch, variables: { rs: null } });
    expect(batchResponse.errors?.map((error) => [error.extensions?.code, error.extensions?.field])).toEqual([["BAD_USER_INPUT", "requests"]]);
    expect(await remainingOf("null-arg")).toBe(4);
  });

  it("counts nothing of an operation one of whose check fields is refused for its input, whichever field comes first", async () => {
    const good = (userId: string) => `{tenantId: "${tenantId}", userId: "${userId}"}`;
    const operations: [string, Record<string, unknown>, string][] = [
      [`{ a: checkLimits(request: ${good("sib-1")}) { allowed } b: checkLimits(request: {tenantId: ""}) { allowed } }`, {}, "sib-1"],
      [`{ b: checkLimits(request: {tenantId: ""}) { allowed } a: checkLimits(request: ${good("sib-2")}) { allowed } }`, {}, "sib-2"],
      [`{ a: checkLimitsBatch(requests: [${good("sib-3")}]) { allowed } b: checkLimitsBatch(requests: [{tenantId: "${tenantId}", cost: 0}]) { allowed } }`, {}, "sib-3"],
      [
        `query Q($r: CheckLimitsInput = ${good("unused")}) { a: checkLimits(request: ${good("sib-4")}) { allowed } b: checkLimits(request: $r) { allowed } }`,
        { r: null },
        "sib-4",
      ],
    ];
    for (const [query, variables, userId] of operations) {
      const response = await suite.client.raw({ query, variables });
      expect(response.data ?? null, query).toBeNull();
      expect(response.errors?.map((error) => error.extensions?.code), query).toEqual(["BAD_USER_INPUT"]);
      expect(await remainingOf(userId), `${query}: the sibling's check was counted`).toBe(4);
    }
  });
});
