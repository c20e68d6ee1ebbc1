/**
 * The real services the tests talk to. When one cannot be reached, its suites
 * are skipped with a loud line, except under CI=true, where that fails the run:
 * CI must never pass by testing nothing.
 */

import { execFile } from "node:child_process";
import net from "node:net";
import pg from "pg";

export const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
export const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

const reachable = new Map<string, Promise<boolean>>();

function probe(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port), timeout: 1000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function available(name: string, where: string, check: () => Promise<boolean>): Promise<boolean> {
  if (!reachable.has(where)) reachable.set(where, check());
  const ok = await reachable.get(where)!;
  if (ok) return true;
  if (process.env.CI === "true") throw new Error(`${name} at ${where} is unreachable, and CI=true: the suites that need it cannot be skipped`);
  console.warn(`\n!!! ${name} at ${where} is unreachable: SKIPPING the suites that need it (CI=true would fail instead) !!!\n`);
  return false;
}

/** Whether a binary runs: `<name> --version` exits 0. */
function runs(binary: string): Promise<boolean> {
  return new Promise((resolve) => execFile(binary, ["--version"], (error) => resolve(error === null)));
}

export const redisAvailable = () => available("Redis", REDIS_URL, () => probe(REDIS_URL));
export const postgresAvailable = () => available("Postgres", POSTGRES_URL, () => probe(POSTGRES_URL));
/** redis-server and redis-cli on PATH, for the suites that start Redis processes of their own (cluster, sentinel, failover). */
export const redisBinariesAvailable = () =>
  available("redis-server and redis-cli", "PATH", async () => (await runs("redis-server")) && (await runs("redis-cli")));

/** The browser the browser suites drive (Debian's chromium; .ci/run installs it when missing). */
export const CHROMIUM = process.env.TEST_CHROMIUM ?? "/usr/bin/chromium";
export const chromiumAvailable = () => available("Chromium", CHROMIUM, () => runs(CHROMIUM));

/** A fresh database of its own; drop() removes it. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `floodgate_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}
