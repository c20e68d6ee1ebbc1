/**
 * Starts the whole service in this process on a free port, on the storage a
 * test asks for: embedded (in-memory PGlite and in-process counters) or real
 * (a Postgres database of its own and Redis under a key prefix of its own).
 */

import { pino } from "pino";
import { startApp, type App } from "../../src/app.js";
import { loadSettings, type Settings } from "../../src/config/settings.js";
import { GraphQLClient } from "./graphql-client.js";
import { deleteByPrefix, testRedis } from "./redis.js";
import { createTestDatabase, REDIS_URL } from "./services.js";

export type Storage = "embedded" | "real";

export interface TestApp {
  app: App;
  client: GraphQLClient;
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
  const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ...extra, ...env });
  const app = await startApp(settings, {
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
  });
  return {
    app,
    settings,
    client: new GraphQLClient(app.url),
    stop: async () => {
      await app.close();
      for (const cleanup of cleanups) await cleanup();
    },
  };
}
