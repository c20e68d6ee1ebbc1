/**
 * What the client and middleware tests share: keys, clients that wait long
 * enough for a loaded machine unless a test is about the deadline, and
 * Floodgates that are down in the two ways that matter (nothing listening; a
 * server that accepts and never answers).
 */

import { createServer, type Server, type Socket } from "node:net";
import { afterEach } from "vitest";
import { FloodgateClient, type FloodgateClientOptions } from "floodgate/client";
import { CreateApiKeyDocument, type Role } from "../generated/graphql.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { freePort } from "../harness/free-port.js";

/** Clients a test file's tests start (track) and other things they leave to undo (cleanups): closed and undone after each test. */
export function closedAfterEachTest(): { track<T extends FloodgateClient>(client: T): T; cleanups: (() => Promise<void>)[] } {
  const clients: FloodgateClient[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return {
    track: (client) => {
      clients.push(client);
      return client;
    },
    cleanups,
  };
}

/** A generous deadline: these tests check exact semantics, which must not hinge on how loaded the machine is. */
export const PATIENT_MS = 5_000;

export async function apiKey(admin: GraphQLClient, tenantId: string, role: Role = "CHECKER"): Promise<string> {
  const { createApiKey } = await admin.data(CreateApiKeyDocument, { input: { tenantId, role, name: `client-${role}` } });
  return createApiKey.secret;
}

export function patientClient(url: string, token: string, options: Partial<FloodgateClientOptions> = {}): FloodgateClient {
  return new FloodgateClient({ url, token, timeoutMs: PATIENT_MS, ...options });
}

/** Polls until `done` holds; fails after timeoutMs. */
export async function until(done: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Until the client's push channel listens, so that its refusal cache is in use. */
export function untilCacheLive(client: FloodgateClient): Promise<void> {
  return until(() => client.stats().refusalCache?.live === true, "the refusal cache's push channel to listen");
}

/** A GraphQL URL where nothing listens: connections are refused. */
export async function refusingUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}/graphql`;
}

/** A server that hangs up every connection as soon as it is made, counting them: a Floodgate going down and up, seen from outside. */
export async function hangingUpServer(): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A server that accepts connections and never answers: only a deadline ends a request to it. */
export async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => socket.destroy());
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
