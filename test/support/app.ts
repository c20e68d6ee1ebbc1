/**
 * Starts the whole service in this process on a free port, on the storage a
 * test asks for: embedded (in-memory PGlite and in-process counters) or real
 * (a Postgres database of its own and Redis under a key prefix of its own).
 * startTestApps starts several instances on the same real storage, as a
 * fleet behind a load balancer would run.
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

interface TestStorage {
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

export async function startTestApp(storage: Storage, env: Record<string, string> = {}): Promise<TestApp> {
  const shared = storage === "real" ? await realStorage() : { env: {}, cleanup: async () => {} };
  try {
    const started = await launch({ ADMIN_TOKEN: testAdminToken(), ...shared.env, ...env });
    return {
      ...started,
      stop: async () => {
        await started.stop();
        await shared.cleanup();
      },
    };
  } catch (error) {
    await shared.cleanup();
    throw error;
  }
}

/** `count` instances on one Postgres database and one Redis key prefix; stop() stops them all and removes what they stored. */
export async function startTestApps(count: number, env: Record<string, string> = {}): Promise<{ apps: TestApp[]; stop(): Promise<void> }> {
  const shared = await realStorage();
  const apps: TestApp[] = [];
  const stop = async () => {
    for (const app of apps.splice(0)) await app.stop();
    await shared.cleanup();
  };
  try {
    // A fleet shares its ADMIN_TOKEN, as it shares its database.
    const fleet = { ADMIN_TOKEN: testAdminToken(), ...shared.env, ...env };
    for (let i = 0; i < count; i++) apps.push(await launch(fleet));
  } catch (error) {
    await stop();
    throw error;
  }
  return { apps: [...apps], stop };
}

async function realStorage(): Promise<TestStorage> {
  const database = await createTestDatabase();
  const { redis, prefix } = testRedis();
  return {
    env: { DATABASE_URL: database.url, REDIS_URL, REDIS_KEY_PREFIX: prefix },
    cleanup: async () => {
      await deleteByPrefix(redis, prefix);
      redis.disconnect();
      await database.drop();
    },
  };
}

async function launch(env: Record<string, string> & { ADMIN_TOKEN: string }): Promise<TestApp> {
  // A generous Redis deadline: these tests check exact semantics, which must not hinge on how loaded the machine is;
  // the failure tests set their own.
  const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", REDIS_TIMEOUT_MS: "2000", ...env });
  const app = await startApp(settings, { logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }) });
  return { app, settings, adminToken: env.ADMIN_TOKEN, client: new GraphQLClient(app.url, env.ADMIN_TOKEN), stop: () => app.close() };
}

/** A fresh bootstrap admin token for one test app or fleet. */
export function testAdminToken(): string {
  return `test-admin-${randomBytes(12).toString("hex")}`;
}
