/**
 * Starts the whole service in this process on a free port, on the storage a
 * test asks for: embedded (in-memory PGlite and in-process counters) or real
 * (a Postgres database of its own and Redis under a key prefix of its own).
 */

import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { startApp, type App } from "../../src/app.js";
import { loadSettings, type Settings } from "../../src/config/settings.js";
import { GraphQLClient } from "./graphql-client.js";
import { deleteByPrefix, testRedis } from "./redis.js";
import { createTestDatabase, REDIS_URL } from "./services.js";

export type Storage = "embedded" | "real";

export interface TestApp {
  app: App;
  /** A client with the bootstrap ADMIN_TOKEN. */
  client: GraphQLClient;
  adminToken: string;
  settings: Settings;
  stop(): Promise<void>;
}

export async function startTestApp(storage: Storage, env: Record<string, string> = {}): Promise<TestApp> {
  const cleanups: (() => Promise<void>)[] = [];
  let extra: Record<string, string> = {};
  if (storage === "real") {
    const database = await createTestDatabase();
    const { redis, prefix } = testRedis();
    cleanups.push(async () => {
      await deleteByPrefix(redis, prefix);
      redis.disconnect();
    });
    cleanups.push(() => database.drop());
    extra = { DATABASE_URL: database.url, REDIS_URL, REDIS_KEY_PREFIX: prefix };
  }
  const adminToken = testAdminToken();
  // A generous Redis deadline: these tests check exact semantics, which must not hinge on how loaded the machine is;
  // the failure tests set their own.
  const settings = loadSettings({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: "memory://",
    ADMIN_TOKEN: adminToken,
    REDIS_TIMEOUT_MS: "2000",
    ...extra,
    ...env,
  });
  const app = await startApp(settings, {
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
  });
  return {
    app,
    settings,
    client: new GraphQLClient(app.url, adminToken),
    adminToken,
    stop: async () => {
      await app.close();
      for (const cleanup of cleanups) await cleanup();
    },
  };
}

/** A fresh bootstrap admin token for one test app. */
export function testAdminToken(): string {
  return `test-admin-${randomBytes(12).toString("hex")}`;
}
