/**
 * Applies prisma/migrations the way `prisma migrate deploy` does, because
 * Prisma's migration engine is a native binary that cannot be downloaded
 * everywhere this service runs: same folder layout, same `_prisma_migrations`
 * table, same checksums (sha256 of migration.sql), same advisory lock. So a
 * machine that does have the engine can run `prisma migrate status` or
 * `deploy` against a database this service migrated, and the other way round.
 */

import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { SqlClient } from "./sql-client.js";

/** The lock id Prisma's migration engine takes, so the two never migrate at once. */
const PRISMA_ADVISORY_LOCK = 72707369;

export const MIGRATIONS_DIR = new URL("../../prisma/migrations/", import.meta.url);

const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

interface AppliedMigration {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export function readMigrations(dir: URL = MIGRATIONS_DIR): Migration[] {
  if (!existsSync(dir)) throw new Error(`no migrations folder at ${dir.pathname}`);
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(new URL(`${name}/migration.sql`, dir), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

/** Applies the migrations not yet applied, in order; returns their names. */
export async function migrate(sql: SqlClient, migrations: Migration[] = readMigrations()): Promise<string[]> {
  await sql.query(`SELECT pg_advisory_lock(${PRISMA_ADVISORY_LOCK})`);
  try {
    await sql.exec(CREATE_MIGRATIONS_TABLE);
    const applied = await sql.query<AppliedMigration>(
      `SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations" ORDER BY started_at`,
    );
    const done = new Map(applied.filter((m) => m.rolled_back_at === null).map((m) => [m.migration_name, m]));
    const ran: string[] = [];
    for (const migration of migrations) {
      const record = done.get(migration.name);
      if (record?.finished_at) {
        if (record.checksum !== migration.checksum) {
          throw new Error(`migration ${migration.name} was changed after it was applied (checksum differs); add a new migration instead`);
        }
        continue;
      }
      if (record) {
        throw new Error(
          `migration ${migration.name} failed earlier and was not rolled back; fix the database, then mark it with \`prisma migrate resolve\``,
        );
      }
      await apply(sql, migration);
      ran.push(migration.name);
    }
    return ran;
  } finally {
    await sql.query(`SELECT pg_advisory_unlock(${PRISMA_ADVISORY_LOCK})`);
  }
}

async function apply(sql: SqlClient, migration: Migration): Promise<void> {
  const id = randomUUID();
  await sql.query(`INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at) VALUES ($1, $2, $3, now())`, [
    id,
    migration.checksum,
    migration.name,
  ]);
  try {
    await sql.exec(`BEGIN;\n${migration.sql}\nCOMMIT;`);
  } catch (error) {
    await sql.exec("ROLLBACK").catch(() => undefined);
    // The transaction rolled back, so the record says so (as `prisma migrate resolve --rolled-back` would) and the next start retries.
    await sql.query(`UPDATE "_prisma_migrations" SET logs = $2, rolled_back_at = now() WHERE id = $1`, [id, String(error)]);
    throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
  }
  await sql.query(`UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1`, [id]);
}
