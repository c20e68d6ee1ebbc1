/**
 * The push channel when its connection goes silent without closing
 * (a peer that vanished, a NAT that dropped the flow). docs/client.md: a ping
 * unanswered for 3 s takes the channel down, so a missed invalidation is
 * served for at most about PING_MS + PONG_TIMEOUT_MS; and close() returns at
 * once, leaving no socket behind.
 */

import { randomUUID } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import { expect, it } from "vitest";
import { createRule, describeOnEachStorage, newTenant } from "../support/api.js";
import { apiKey, closedAfterEachTest, patientClient, until, untilCacheLive } from "../support/floodgate-clients.js";
import { PING_MS, PONG_TIMEOUT_MS } from "../../src/client/invalidation-feed.js";

const { track, cleanups } = closedAfterEachTest();

interface SilencingProxy {
  url: string;
  /** From now on nothing passes either way on the WebSocket connections, which stay open. */
  silenceWebSockets(): void;
  /** Client-side WebSocket connections still open. */
  openWebSockets(): number;
  close(): Promise<void>;
}

/** A TCP proxy to Floodgate that can make its WebSocket connections go silent, as a dead peer looks. */
async function silencingProxy(target: URL): Promise<SilencingProxy> {
  const sockets = new Set<Socket>();
  const webSockets = new Set<Socket>();
  let silent = false;
  const server: Server = createServer((client) => {
    const upstream = connect({ host: target.hostname, port: Number(target.port) });
    let isWebSocket: boolean | null = null;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => {
        sockets.delete(socket);
        webSockets.delete(socket);
      });
      socket.on("error", () => socket.destroy());
    }
    const passes = () => !(isWebSocket === true && silent);
    client.on("data", (chunk: Buffer) => {
      if (isWebSocket === null) {
        isWebSocket = /^upgrade:\s*websocket/im.test(chunk.toString("latin1"));
        if (isWebSocket) webSockets.add(client);
      }
      if (passes()) upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (passes()) client.write(chunk);
    });
    upstream.on("close", () => {
      if (passes()) client.destroy();
    });
    client.on("close", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    silenceWebSockets: () => {
      silent = true;
    },
    openWebSockets: () => webSockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

await describeOnEachStorage("FloodgateClient, a push channel gone silent", (suite) => {
  it(
    "stops serving a refusal within PING_MS + PONG_TIMEOUT_MS of its push channel going silent: a reset it missed is not outlived for long",
    async () => {
      const tenantId = newTenant();
      const rule = await createRule(suite.client, { tenantId, name: `per-user-${randomUUID()}`, scope: ["USER"], limit: 1, window: 1, windowUnit: "HOURS" });
      const proxy = await silencingProxy(new URL(suite.t.app.url));
      cleanups.push(() => proxy.close());
      const client = track(patientClient(proxy.url, await apiKey(suite.client, tenantId)));
      await untilCacheLive(client);
      const request = { tenantId, userId: "u1" };
      expect((await client.check(request)).allowed).toBe(true);
      expect(await client.check(request)).toMatchObject({ allowed: false, source: "COUNTER_STORE" });
      expect((await client.check(request)).source).toBe("CLIENT_REFUSAL_CACHE");

      proxy.silenceWebSockets();
      // The bucket is reset: the invalidation Floodgate pushes never arrives.
      const admin = track(patientClient(suite.t.app.url, suite.t.adminToken, { cache: false }));
      expect(await admin.resetLimit(rule.id, "user:u1")).toBe(true);

      // By then a ping went unanswered for PONG_TIMEOUT_MS: the channel is down and the cache forgot.
      await new Promise((resolve) => setTimeout(resolve, PING_MS + PONG_TIMEOUT_MS + 2_000));
      expect(client.stats().refusalCache?.live).toBe(false);
      expect(await client.check(request)).toMatchObject({ allowed: true, source: "COUNTER_STORE" });
    },
    40_000,
  );

  it("close() lets go of a push channel connection gone silent: no socket stays open waiting for a close frame", async () => {
    const tenantId = newTenant();
    const proxy = await silencingProxy(new URL(suite.t.app.url));
    cleanups.push(() => proxy.close());
    const client = patientClient(proxy.url, await apiKey(suite.client, tenantId));
    await untilCacheLive(client);
    expect(proxy.openWebSockets()).toBe(1);
    proxy.silenceWebSockets();
    await client.close();
    // ws waits 30 s for the peer's close frame before it lets the socket go, holding a timer and the socket meanwhile.
    await until(() => proxy.openWebSockets() === 0, "the client to let go of its push channel's socket", 5_000);
  }, 40_000);
});
