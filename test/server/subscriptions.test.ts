/**
 * The WebSocket side of the API (src/server/subscription-server.ts): every
 * refusal comes back with the code Apollo gives the same mistake over HTTP and
 * ends only that subscription; a socket holds at most
 * MAX_SUBSCRIPTIONS_PER_SOCKET subscriptions, and a key at most
 * MAX_SOCKETS_PER_KEY sockets on an instance.
 */

import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { openSocket, type SocketSubscription, type TestSocket } from "../support/subscriptions.js";

const MAX_SUBSCRIPTIONS = 3;
const MAX_SOCKETS = 2;

describe("graphql-ws: refusals with their codes, and bounded subscriptions and sockets", () => {
  let t: TestApp;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    t = await startTestApp("embedded", {
      ADMIN_MUTATIONS_PER_MINUTE: "100000",
      MAX_QUERY_DEPTH: "2",
      MAX_QUERY_FIELDS: "10",
      MAX_SUBSCRIPTIONS_PER_SOCKET: String(MAX_SUBSCRIPTIONS),
      MAX_SOCKETS_PER_KEY: String(MAX_SOCKETS),
    });
  });
  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((socket) => socket.close()));
  });
  afterAll(() => t?.stop());

  const socket = (token = t.adminToken) => {
    const opened = openSocket(t.app.url, token);
    sockets.push(opened);
    return opened;
  };
  const changes = (tenantId: string) => `subscription { ruleChanges(tenantId: "${tenantId}") { ruleId } }`;
  /** Written as small as MAX_QUERY_DEPTH 2 and MAX_QUERY_FIELDS 10 allow. */
  async function createRule(tenantId: string): Promise<void> {
    const { errors } = await t.client.raw({ query: `mutation { createRule(input: { tenantId: "${tenantId}", name: "r-${randomUUID()}", limit: 1, window: 1 }) { id } }` });
    expect(errors).toBeUndefined();
  }

  /** Creates rules of the tenant until every subscription has seen one: from then on they are all listening. */
  async function untilListening(tenantId: string, subscriptions: SocketSubscription[]): Promise<void> {
    for (let attempt = 0; subscriptions.some((s) => s.events.length === 0); attempt++) {
      if (attempt === 100) throw new Error("the subscriptions never started delivering");
      await createRule(tenantId);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it("answers each refusal with the code HTTP gives, ends only that subscription, and keeps the socket open", async () => {
    const ws = socket();
    await ws.connected;
    const refusals: [string, string, Record<string, unknown>?][] = [
      ["{ rules { id } }", "BAD_REQUEST"],
      ['mutation { deleteRule(id: "x") }', "BAD_REQUEST"],
      ["subscription { ruleChanges { rule { id } } }", "GRAPHQL_VALIDATION_FAILED"],
      [`subscription { ruleChanges { ${Array.from({ length: 11 }, (_, i) => `a${i}: ruleId`).join(" ")} } }`, "GRAPHQL_VALIDATION_FAILED"],
      ["subscription { noSuchField }", "GRAPHQL_VALIDATION_FAILED"],
      ["subscription {", "GRAPHQL_PARSE_FAILED"],
      ["subscription A { ruleChanges { ruleId } } subscription B { ruleChanges { ruleId } }", "OPERATION_RESOLUTION_FAILURE"],
      ["subscription ($t: String) { ruleChanges(tenantId: $t) { ruleId } }", "BAD_USER_INPUT", { t: 5 }],
    ];
    const answers = [];
    for (const [query, , variables] of refusals) answers.push(await ws.subscribe(query, variables).ended());
    expect(answers.map((errors) => errors?.[0]?.extensions?.code)).toEqual(refusals.map(([, code]) => code));
    expect(answers[0]![0]!.message).toBe("only subscriptions run over WebSocket: send queries over HTTP POST /graphql");
    expect(answers[2]![0]!.message).toBe("the query is more than 2 levels deep; at most 2 are allowed");
    expect(answers[5]![0]!.message).toMatch(/^Syntax Error: /);

    const tenantId = `ws-${randomUUID()}`;
    const after = ws.subscribe(changes(tenantId));
    await untilListening(tenantId, [after]);
    expect(after.errors).toBeNull();
  });

  it(`refuses a socket's subscription past MAX_SUBSCRIPTIONS_PER_SOCKET (${MAX_SUBSCRIPTIONS}) with TOO_MANY_SUBSCRIPTIONS; the others go on, and a completed one frees its place`, async () => {
    const ws = socket();
    const tenantId = `ws-${randomUUID()}`;
    const held = Array.from({ length: MAX_SUBSCRIPTIONS }, () => ws.subscribe(changes(tenantId)));
    await untilListening(tenantId, held);

    const refused = await ws.subscribe(changes(tenantId)).ended();
    expect(refused?.[0]?.extensions?.code).toBe("TOO_MANY_SUBSCRIPTIONS");
    expect(refused?.[0]?.message).toBe(
      `this socket already holds ${MAX_SUBSCRIPTIONS} subscriptions, the most one may (MAX_SUBSCRIPTIONS_PER_SOCKET): complete one first, or open another socket`,
    );

    held[0]!.stop();
    const replacement = ws.subscribe(changes(tenantId));
    const seen = held.slice(1).map((s) => s.events.length);
    await untilListening(tenantId, [replacement]);
    expect(replacement.errors).toBeNull();
    await createRule(tenantId);
    await expect.poll(() => held.slice(1).every((s, i) => s.events.length > seen[i]!)).toBe(true);
    expect(held.map((s) => s.errors)).toEqual(held.map(() => null));
  });

  it(`closes a key's socket past MAX_SOCKETS_PER_KEY (${MAX_SOCKETS}) with 4429; other keys are not affected, and a closed socket frees its place`, async () => {
    const { data } = await t.client.raw<{ createApiKey: { secret: string } }>({
      query: 'mutation { createApiKey(input: { tenantId: "ws-viewers", role: VIEWER, name: "dashboard" }) { secret } }',
    });
    const secret = data!.createApiKey.secret;
    const held = Array.from({ length: MAX_SOCKETS }, () => socket(secret));
    await Promise.all(held.map((ws) => ws.connected));

    const extra = socket(secret);
    expect(await extra.closed).toBe(4429);
    await expect(extra.connected).rejects.toThrow(/closed with 4429/);
    await socket().connected;

    await held[0]!.close();
    // The server hears of the close a moment after the client: try until it has.
    await expect
      .poll(async () => {
        const again = socket(secret);
        return again.connected.then(
          () => true,
          () => false,
        );
      })
      .toBe(true);
  });
});
