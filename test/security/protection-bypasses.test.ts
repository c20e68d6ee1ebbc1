/**
 * The API's own protections (README "Access": MAX_QUERY_DEPTH,
 * MAX_QUERY_FIELDS, ADMIN_MUTATIONS_PER_MINUTE) must hold whichever way an
 * operation is written or sent: mutations selected through fragments count
 * like mutations selected directly, and an operation sent over the WebSocket
 * meets the same limits as over HTTP.
 */

import { randomUUID } from "node:crypto";
import { createClient, type Client } from "graphql-ws";
import type { GraphQLFormattedError } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ListRulesDocument } from "../generated/graphql.js";
import { realStorageAvailable } from "../support/api.js";
import { startTestApp, type Storage } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";

const storage: Storage = (await realStorageAvailable()) ? "real" : "embedded";
const LIMIT = 3;

describe(`the API's protections cannot be side-stepped (${storage} storage)`, () => {
  let t: TestApp;
  /** One key per test: each has its own mutation budget. */
  const secrets: string[] = [];
  const sockets: Client[] = [];

  beforeAll(async () => {
    t = await startTestApp(storage, { ADMIN_MUTATIONS_PER_MINUTE: String(LIMIT), MAX_QUERY_DEPTH: "6", MAX_QUERY_FIELDS: "60" });
    // The bootstrap token's own budget is LIMIT changes: one operation creating LIMIT keys uses it exactly.
    const aliases = Array.from({ length: LIMIT }, (_, i) => `k${i}: createApiKey(input: { tenantId: "*", role: ADMIN, name: "bypass ${i}" }) { secret }`);
    const { data, errors } = await t.client.raw<Record<string, { secret: string }>>({ query: `mutation { ${aliases.join(" ")} }` });
    expect(errors).toBeUndefined();
    secrets.push(...Object.values(data!).map((k) => k.secret));
  });

  afterAll(async () => {
    await Promise.all(sockets.map((client) => client.dispose()));
    await t?.stop();
  });

  const createRules = (tenantId: string, count: number) =>
    Array.from({ length: count }, (_, i) => `r${i}: createRule(input: { tenantId: "${tenantId}", name: "r${i}", limit: 1, window: 1 }) { id }`).join(" ");

  async function rulesOf(tenantId: string): Promise<number> {
    return (await t.client.data(ListRulesDocument, { tenantId })).rules.length;
  }

  function socket(secret: string): Client {
    const client = createClient({ url: t.app.url.replace(/^http/, "ws"), webSocketImpl: WebSocket, retryAttempts: 0, connectionParams: { authorization: `Bearer ${secret}` } });
    sockets.push(client);
    return client;
  }

  /** One operation over the WebSocket: what came back, data and errors. */
  function overWebSocket(client: Client, query: string): Promise<{ data: unknown; errors: readonly GraphQLFormattedError[] }> {
    return new Promise((resolve) => {
      let data: unknown = null;
      const errors: GraphQLFormattedError[] = [];
      client.subscribe(
        { query },
        {
          next: (result) => {
            data = result.data ?? null;
            errors.push(...(result.errors ?? []));
          },
          error: (error) => {
            errors.push(...(Array.isArray(error) ? (error as GraphQLFormattedError[]) : [{ message: String(error) }]));
            resolve({ data, errors });
          },
          complete: () => resolve({ data, errors }),
        },
      );
    });
  }

  it.each([
    ["a fragment spread", (body: string) => `mutation { ...M } fragment M on Mutation { ${body} }`],
    ["an inline fragment", (body: string) => `mutation { ... on Mutation { ${body} } }`],
  ])(`counts mutations selected through %s against ADMIN_MUTATIONS_PER_MINUTE (${LIMIT}): ${2 * LIMIT} of them are refused`, async (_how, write) => {
    const tenantId = `bypass-${randomUUID()}`;
    const client = new GraphQLClient(t.app.url, secrets.pop());
    const response = await client.raw({ query: write(createRules(tenantId, 2 * LIMIT)) });
    expect(response.errors?.[0]?.extensions?.code).toBe("TOO_MANY_REQUESTS");
    expect(await rulesOf(tenantId), "rules created past the limit").toBeLessThanOrEqual(LIMIT);
  });

  it(`counts mutations sent over the WebSocket against ADMIN_MUTATIONS_PER_MINUTE (${LIMIT})`, async () => {
    const tenantId = `bypass-${randomUUID()}`;
    const client = socket(secrets.pop()!);
    const answers = [];
    for (let i = 0; i < 2 * LIMIT; i++) {
      answers.push(await overWebSocket(client, `mutation { createRule(input: { tenantId: "${tenantId}", name: "r${i}", limit: 1, window: 1 }) { id } }`));
    }
    expect(await rulesOf(tenantId), "rules created past the limit").toBeLessThanOrEqual(LIMIT);
    expect(answers.at(-1)!.errors.length).toBeGreaterThan(0);
  });

  it("refuses a query over the WebSocket deeper than the depth limits (MAX_QUERY_DEPTH 6, introspection as deep as the standard query's 15), as over HTTP", async () => {
    const query = `{ __schema { types { fields { type { ${"ofType { ".repeat(12)}name${" }".repeat(12)} } } } } }`;
    const overHttp = await t.client.raw({ query });
    expect(overHttp.errors?.[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");
    const answer = await overWebSocket(socket(t.adminToken), query);
    expect(answer.data).toBeNull();
    expect(answer.errors.length).toBeGreaterThan(0);
    expect(answer.errors[0]).toMatchObject({ message: overHttp.errors?.[0]?.message, extensions: { code: "GRAPHQL_VALIDATION_FAILED" } });
  });

  it("refuses a query over the WebSocket selecting more than MAX_QUERY_FIELDS (60), as over HTTP", async () => {
    const query = `{ ${Array.from({ length: 61 }, (_, i) => `a${i}: __typename`).join(" ")} }`;
    const overHttp = await t.client.raw({ query });
    expect(overHttp.errors?.[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");
    const answer = await overWebSocket(socket(t.adminToken), query);
    expect(answer.data).toBeNull();
    expect(answer.errors.length).toBeGreaterThan(0);
    expect(answer.errors[0]).toMatchObject({ message: overHttp.errors?.[0]?.message, extensions: { code: "GRAPHQL_VALIDATION_FAILED" } });
  });
});
