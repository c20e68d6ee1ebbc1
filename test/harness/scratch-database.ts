/** A Postgres database of the script's own, dropped afterwards, on the server DATABASE_URL points at (default: this machine's). */

import pg from "pg";

export const POSTGRES_URL = process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

export async function createScratchDatabase(purpose: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `floodgate_${purpose}_${process.pid}`;
  await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
