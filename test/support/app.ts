/**
 * Starts the whole service in this process (test/harness/in-process-app.ts) on the storage a
 * test asks for: embedded (in-memory PGlite and in-process counters) or real
 * (a Postgres database of its own and Redis under a key prefix of its own).
 * startTestApps starts several instances on the same real storage, as a
 * fleet behind a load balancer would run.
 */

import { deleteByPrefix } from "../harness/delete-by-prefix.js";
import { startInProcessApp, testAdminToken, type TestApp } from "../harness/in-process-app.js";
import { testRedis } from "./redis.js";
import { createTestDatabase, REDIS_URL } from "./services.js";

export type Storage = "embedded" | "real";

interface TestStorage {
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

export async function startTestApp(storage: Storage, env: Record<string, string> = {}): Promise<TestApp> {
  const shared = storage === "real" ? await realStorage() : { env: {}, cleanup: async () => {} };
  try {
    const started = await startInProcessApp({ ...shared.env, ...env });
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
    for (let i = 0; i < count; i++) apps.push(await startInProcessApp(fleet));
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
