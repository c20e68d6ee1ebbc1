/**
 * A revoked API key stops everywhere: on the instance that revoked it at once
 * (its WebSockets closed with 4403, nothing more delivered, HTTP 401), on the
 * other instances of the fleet as soon as the revocation arrives on the event
 * bus (their cached lookups forgotten, their sockets of it closed), and on an
 * instance that never hears of it (cut off from the fleet's pub/sub) within
 * API_KEY_CACHE_MS, by looking the keys of its open sockets up again.
 *
 * Real graphql-ws clients, two instances on one Postgres database and one
 * Redis prefix, and a third on the same database under a prefix of its own.
 * Times are asserted as generous upper bounds and printed.
 */

import { print } from "graphql";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CreateApiKeyDocument, ListRulesDocument, RevokeApiKeyDocument, RuleChangesDocument, ThrottleEventsDocument } from "../generated/graphql.js";
import { check, createRule, newTenant, realStorageAvailable } from "../support/api.js";
import { startTestApp, startTestApps } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { openSocket, type SocketSubscription, type TestSocket } from "../support/subscriptions.js";

/** The fleet's own: long enough that only the event bus can explain a revocation reaching B in time. */
const FLEET_CACHE_MS = 30_000;
/** The cut-off instance's: its safety net. */
const CUT_OFF_CACHE_MS = 300;
const BUS_BOUND_MS = 1000;
const SAFETY_NET_BOUND_MS = 10 * CUT_OFF_CACHE_MS;

describe.runIf(await realStorageAvailable())("revoking an API key across instances", () => {
  let stopFleet: () => Promise<void>;
  let a: TestApp;
  let b: TestApp;
  /** Same database as A and B, but it hears none of their events. */
  let cutOff: TestApp;
  const sockets: TestSocket[] = [];
  const measured: string[] = [];

  beforeAll(async () => {
    const fleet = await startTestApps(2, { API_KEY_CACHE_MS: String(FLEET_CACHE_MS) });
    [a, b] = fleet.apps as [TestApp, TestApp];
    stopFleet = fleet.stop;
    cutOff = await startTestApp("real", { DATABASE_URL: a.settings.databaseUrl!, API_KEY_CACHE_MS: String(CUT_OFF_CACHE_MS) });
  });
  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((socket) => socket.close()));
  });
  afterAll(async () => {
    await cutOff?.stop();
    await stopFleet?.();
    if (measured.length > 0) console.log(`measured on this machine:\n  ${measured.join("\n  ")}`);
  });

  const socket = (on: TestApp, secret: string) => {
    const opened = openSocket(on.app.url, secret);
    sockets.push(opened);
    return opened;
  };

  async function createKey(tenantId: string, role: "VIEWER" | "CHECKER" = "VIEWER") {
    return (await a.client.data(CreateApiKeyDocument, { input: { tenantId, role, name: `${role} ${Date.now()}` } })).createApiKey;
  }

  /** Creates rules of the tenant (through A) until every subscription has seen one: from then on they are listening. */
  async function untilListening(tenantId: string, subscriptions: SocketSubscription[]): Promise<void> {
    for (let attempt = 0; subscriptions.some((s) => s.events.length === 0); attempt++) {
      if (attempt === 100) throw new Error("the subscriptions never started delivering");
      await createRule(a.client, { tenantId, name: `probe-${attempt}-${Date.now()}`, limit: 1, window: 1 });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** The socket's close code, or "open" if it is still open after boundMs; records how long it took from `since`. */
  async function closeCode(what: string, ws: TestSocket, since: number, boundMs: number): Promise<number | "open"> {
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([ws.closed, new Promise<"open">((resolve) => (timer = setTimeout(() => resolve("open"), boundMs)))]);
    clearTimeout(timer);
    if (code !== "open") measured.push(`${what}: ${(performance.now() - since).toFixed(1)} ms`);
    return code;
  }

  /** Asks until the key is refused with 401, up to boundMs; records how long it took from `since`. */
  async function untilRefused(what: string, on: TestApp, secret: string, since: number, boundMs: number): Promise<number> {
    const client = new GraphQLClient(on.app.url, secret);
    for (;;) {
      const { status, errors } = await client.request(ListRulesDocument, {});
      if (status === 401) {
        expect(errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
        measured.push(`${what}: ${(performance.now() - since).toFixed(1)} ms`);
        return status;
      }
      if (performance.now() - since > boundMs) return status;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it("closes the key's sockets on the revoking instance at once with 4403, delivers them nothing more, and refuses it everywhere on that instance", async () => {
    const tenantId = newTenant();
    const [revoked, bystander] = [await createKey(tenantId), await createKey(tenantId)];
    const ws = socket(a, revoked.secret);
    const changes = ws.subscribe(print(RuleChangesDocument), { tenantId });
    const throttles = ws.subscribe(print(ThrottleEventsDocument), { tenantId });
    const theirs = socket(a, bystander.secret).subscribe(print(RuleChangesDocument), { tenantId });
    await untilListening(tenantId, [changes, theirs]);

    const sent = performance.now();
    expect((await a.client.data(RevokeApiKeyDocument, { id: revoked.apiKey.id })).revokeApiKey).toBe(true);
    expect(await closeCode("revoked on A, its socket on A closed", ws, sent, BUS_BOUND_MS)).toBe(4403);

    const delivered = changes.events.length;
    const after = await createRule(a.client, { tenantId, name: "made after the revocation", scope: ["USER"], limit: 1, window: 60 });
    await check(a.client, { tenantId, userId: "u1" });
    expect((await check(a.client, { tenantId, userId: "u1" })).allowed).toBe(false);
    await expect.poll(() => theirs.events.some((e) => JSON.stringify(e).includes(after.id))).toBe(true);
    expect(changes.events.length).toBe(delivered);
    expect(throttles.events).toEqual([]);

    expect((await new GraphQLClient(a.app.url, revoked.secret).request(ListRulesDocument, { tenantId })).status).toBe(401);
    const again = socket(a, revoked.secret);
    expect(await again.closed).toBe(4403);
    expect(theirs.errors).toBeNull();
  });

  it(`closes the key's sockets on another instance, and refuses it there over HTTP, as soon as the revocation arrives on the event bus (within ${BUS_BOUND_MS} ms; its lookup cache alone would take ${FLEET_CACHE_MS} ms)`, async () => {
    const tenantId = newTenant();
    const revoked = await createKey(tenantId);
    expect((await new GraphQLClient(b.app.url, revoked.secret).request(ListRulesDocument, { tenantId })).status).toBe(200);
    const ws = socket(b, revoked.secret);
    await untilListening(tenantId, [ws.subscribe(print(RuleChangesDocument), { tenantId })]);

    const sent = performance.now();
    await a.client.data(RevokeApiKeyDocument, { id: revoked.apiKey.id });
    expect(await closeCode("revoked on A, its socket on B closed", ws, sent, BUS_BOUND_MS)).toBe(4403);
    expect(await untilRefused("revoked on A, refused over HTTP by B", b, revoked.secret, sent, BUS_BOUND_MS)).toBe(401);
  });

  it(`closes the key's sockets, and refuses it, within API_KEY_CACHE_MS (${CUT_OFF_CACHE_MS} ms) on an instance that never hears of the revocation`, async () => {
    const tenantId = newTenant();
    const revoked = await createKey(tenantId);
    expect((await new GraphQLClient(cutOff.app.url, revoked.secret).request(ListRulesDocument, { tenantId })).status).toBe(200);
    const ws = socket(cutOff, revoked.secret);
    await ws.connected;

    const sent = performance.now();
    await a.client.data(RevokeApiKeyDocument, { id: revoked.apiKey.id });
    expect(await closeCode("revoked on A, its socket on an instance cut off from the bus closed", ws, sent, SAFETY_NET_BOUND_MS)).toBe(4403);
    expect(await untilRefused("revoked on A, refused over HTTP by the cut-off instance", cutOff, revoked.secret, sent, SAFETY_NET_BOUND_MS)).toBe(401);
  });
});
