/**
 * The whole service started in this process on a free port, with a client
 * holding its bootstrap ADMIN_TOKEN. On its own it runs on the embedded
 * storage (in-memory PGlite, counters in process); `env` points it elsewhere.
 * test/support/app.ts gives tests their storage on top of it; the cluster
 * failover run (cluster-failover.ts) starts it on a Redis Cluster.
 */

import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { startApp, type App } from "../../src/app.js";
import { loadSettings, type Settings } from "../../src/config/settings.js";
import { GraphQLClient } from "./graphql-client.js";

export interface TestApp {
  app: App;
  /** A client with the bootstrap ADMIN_TOKEN. */
  client: GraphQLClient;
  adminToken: string;
  settings: Settings;
  stop(): Promise<void>;
}

/** Starts the service with these settings over the test defaults; a fresh ADMIN_TOKEN unless `env` gives one. */
export async function startInProcessApp(env: Record<string, string> = {}): Promise<TestApp> {
  const adminToken = env.ADMIN_TOKEN ?? testAdminToken();
  // A generous Redis deadline: these tests check exact semantics, which must not hinge on how loaded the machine is;
  // the failure tests set their own.
  const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", REDIS_TIMEOUT_MS: "2000", ...env, ADMIN_TOKEN: adminToken });
  const app = await startApp(settings, { logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }) });
  return { app, settings, adminToken, client: new GraphQLClient(app.url, adminToken), stop: () => app.close() };
}

/** A fresh bootstrap admin token for one test app or fleet. */
export function testAdminToken(): string {
  return `test-admin-${randomBytes(12).toString("hex")}`;
}
