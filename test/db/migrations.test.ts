/**
 * The migration runner against a real Postgres and an in-memory PGlite: the
 * same cases for both, each on a database of its own. The records it writes
 * must be the ones `prisma migrate deploy` writes, so that `prisma migrate
 * status` reads a database this service migrated (and the other way round).
 */

import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { migrate, MIGRATIONS_DIR, readMigrations, type Migration } from "../../src/db/migrations.js";
import { pgliteSqlClient, pgSqlClient, type SqlClient } from "../../src/db/sql-client.js";
import { freshPostgresDatabases } from "../support/databases.js";
import { postgresAvailable } from "../support/services.js";

interface MigrationRecord {
  id: string;
  checksum: string;
  finished_at: Date | null;
  migration_name: string;
  logs: string | null;
  rolled_back_at: Date | null;
  started_at: Date;
  applied_steps_count: number;
}

/** The migrations on disk, read here independently of readMigrations(). */
const ON_DISK = readdirSync(MIGRATIONS_DIR, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort()
  .map((name) => ({ name, sql: readFileSync(new URL(`${name}/migration.sql`, MIGRATIONS_DIR)) }));
const NAMES = ON_DISK.map((m) => m.name);

function sha256(text: string | Buffer): string {
  return createHash("sha256").update(text).digest("hex");
}

function migration(name: string, sql: string): Migration {
  return { name, sql, checksum: sha256(sql) };
}

/** Sorts after every real migration; its second statement fails, after its first has created a table. */
const BROKEN = migration(
  "29991231000000_broken",
  `CREATE TABLE "half_applied" ("id" INTEGER);\nINSERT INTO "no_such_table" VALUES (1);\n`,
);
const BROKEN_FIXED = migration(BROKEN.name, `CREATE TABLE "half_applied" ("id" INTEGER);\n`);

function records(sql: SqlClient): Promise<MigrationRecord[]> {
  return sql.query<MigrationRecord>(`SELECT * FROM "_prisma_migrations" ORDER BY started_at, migration_name`);
}

async function tableExists(sql: SqlClient, table: string): Promise<boolean> {
  const [row] = await sql.query<{ found: string | null }>(`SELECT to_regclass($1)::text AS found`, [`public."${table}"`]);
  return row?.found != null;
}

interface Target {
  sql: SqlClient;
}

function migrationCases(open: () => Promise<Target>): void {
  it("creates the rules table with every column of the Prisma schema", async () => {
    const { sql } = await open();
    await migrate(sql);
    const columns = await sql.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'rules' ORDER BY ordinal_position`,
    );
    expect(columns.map((c) => c.column_name)).toEqual([
      "id",
      "tenant_id",
      "name",
      "scope",
      "resource",
      "method",
      "algorithm",
      "limit",
      "window",
      "window_unit",
      "burst",
      "action",
      "failure_mode",
      "priority",
      "enabled",
      "version",
      "created_at",
      "updated_at",
      // Added by later migrations: a new column comes last.
      "reach",
      "attribute_keys",
      "attribute_conditions",
      "calendar",
      "auto_ban",
    ]);
  });

  it("returns the names of the migrations it applied, in order", async () => {
    const { sql } = await open();
    expect(await migrate(sql)).toEqual(NAMES);
  });

  it("creates _prisma_migrations with the columns, types and defaults Prisma's migration engine uses", async () => {
    const { sql } = await open();
    await migrate(sql);
    const columns = await sql.query<{
      column_name: string;
      data_type: string;
      character_maximum_length: number | null;
      is_nullable: string;
      column_default: string | null;
    }>(
      `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '_prisma_migrations' ORDER BY ordinal_position`,
    );
    expect(columns).toEqual([
      { column_name: "id", data_type: "character varying", character_maximum_length: 36, is_nullable: "NO", column_default: null },
      { column_name: "checksum", data_type: "character varying", character_maximum_length: 64, is_nullable: "NO", column_default: null },
      { column_name: "finished_at", data_type: "timestamp with time zone", character_maximum_length: null, is_nullable: "YES", column_default: null },
      { column_name: "migration_name", data_type: "character varying", character_maximum_length: 255, is_nullable: "NO", column_default: null },
      { column_name: "logs", data_type: "text", character_maximum_length: null, is_nullable: "YES", column_default: null },
      { column_name: "rolled_back_at", data_type: "timestamp with time zone", character_maximum_length: null, is_nullable: "YES", column_default: null },
      { column_name: "started_at", data_type: "timestamp with time zone", character_maximum_length: null, is_nullable: "NO", column_default: "now()" },
      { column_name: "applied_steps_count", data_type: "integer", character_maximum_length: null, is_nullable: "NO", column_default: "0" },
    ]);
  });

  it("records each applied migration as Prisma does: sha256 checksum of migration.sql, finished, one step, no logs", async () => {
    const { sql } = await open();
    await migrate(sql);
    const rows = await records(sql);
    expect(rows).toHaveLength(ON_DISK.length);
    for (const [i, row] of rows.entries()) {
      const onDisk = ON_DISK[i]!;
      expect(row).toEqual({
        id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
        checksum: sha256(onDisk.sql),
        finished_at: expect.any(Date),
        migration_name: onDisk.name,
        logs: null,
        rolled_back_at: null,
        started_at: expect.any(Date),
        applied_steps_count: 1,
      });
      expect(row.finished_at!.getTime()).toBeGreaterThanOrEqual(row.started_at.getTime());
    }
  });

  it("numbers the revisions written before the revision sequence, and draws larger numbers for the ones after", async () => {
    const { sql } = await open();
    const all = readMigrations();
    const sequence = all.findIndex((m) => m.name.endsWith("_rule_revision_sequence"));
    expect(sequence).toBeGreaterThan(0);
    await migrate(sql, all.slice(0, sequence));
    const revision = (ruleId: string) =>
      sql.query(`INSERT INTO "rule_revisions" ("rule_id", "version", "tenant_id", "kind", "changed_at") VALUES ($1, 1, 't', 'CREATED', now())`, [ruleId]);
    await revision("before-1");
    await revision("before-2");
    expect(await migrate(sql)).toEqual(all.slice(sequence).map((m) => m.name));
    await revision("after");
    const rows = await sql.query<{ rule_id: string; seq: string }>(`SELECT "rule_id", "seq"::text AS seq FROM "rule_revisions"`);
    const seqOf = new Map(rows.map((r) => [r.rule_id, BigInt(r.seq)]));
    expect(new Set(seqOf.values()).size).toBe(3);
    expect(seqOf.get("after")! > seqOf.get("before-1")! && seqOf.get("after")! > seqOf.get("before-2")!).toBe(true);
  });

  it("applies nothing and returns [] when every migration is already applied", async () => {
    const { sql } = await open();
    await migrate(sql);
    const before = await records(sql);
    expect(await migrate(sql)).toEqual([]);
    expect(await records(sql)).toEqual(before);
  });

  it("applies only the migrations added since the last run", async () => {
    const { sql } = await open();
    const added = migration("29991231000000_added", `CREATE TABLE "added" ("id" INTEGER);\n`);
    await migrate(sql);
    expect(await migrate(sql, [...readMigrations(), added])).toEqual([added.name]);
    expect(await tableExists(sql, "added")).toBe(true);
  });

  it("refuses a migration whose file changed after it was applied, naming it", async () => {
    const { sql } = await open();
    await migrate(sql);
    const edited = readMigrations().map((m, i) => (i === 0 ? migration(m.name, `${m.sql}\n-- edited afterwards\n`) : m));
    await expect(migrate(sql, edited)).rejects.toThrow(`migration ${NAMES[0]} was changed after it was applied`);
  });

  it("throws an error naming a migration whose SQL fails", async () => {
    const { sql } = await open();
    await expect(migrate(sql, [...readMigrations(), BROKEN])).rejects.toThrow(`migration ${BROKEN.name} failed: `);
  });

  it("rolls back every statement of a failed migration and keeps the ones applied before it", async () => {
    const { sql } = await open();
    await migrate(sql, [...readMigrations(), BROKEN]).catch(() => undefined);
    expect(await tableExists(sql, "half_applied")).toBe(false);
    expect(await tableExists(sql, "rules")).toBe(true);
  });

  it("records a failed migration with its error in logs and rolled_back_at set, never finished", async () => {
    const { sql } = await open();
    await migrate(sql, [...readMigrations(), BROKEN]).catch(() => undefined);
    const failed = (await records(sql)).filter((r) => r.migration_name === BROKEN.name);
    expect(failed).toEqual([
      expect.objectContaining({
        checksum: BROKEN.checksum,
        finished_at: null,
        logs: expect.stringContaining("no_such_table"),
        rolled_back_at: expect.any(Date),
        applied_steps_count: 0,
      }),
    ]);
  });

  it("retries a rolled-back migration on the next run", async () => {
    const { sql } = await open();
    await migrate(sql, [...readMigrations(), BROKEN]).catch(() => undefined);
    expect(await migrate(sql, [...readMigrations(), BROKEN_FIXED])).toEqual([BROKEN.name]);
    expect(await tableExists(sql, "half_applied")).toBe(true);
    const attempts = (await records(sql)).filter((r) => r.migration_name === BROKEN.name);
    expect(attempts.map((r) => [r.rolled_back_at === null, r.finished_at === null])).toEqual([
      [false, true],
      [true, false],
    ]);
  });

  it("refuses to run past a migration that failed and was not rolled back, naming it", async () => {
    const { sql } = await open();
    await migrate(sql);
    await sql.query(`INSERT INTO "_prisma_migrations" (id, checksum, migration_name) VALUES ($1, $2, $3)`, [
      "00000000-0000-4000-8000-000000000000",
      BROKEN.checksum,
      BROKEN.name,
    ]);
    await expect(migrate(sql, [...readMigrations(), BROKEN])).rejects.toThrow(
      `migration ${BROKEN.name} failed earlier and was not rolled back`,
    );
  });
}

describe.runIf(await postgresAvailable())("migrations on Postgres", () => {
  const freshDatabase = freshPostgresDatabases();
  const clients: pg.Client[] = [];

  async function connect(url: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    clients.push(client);
    return client;
  }

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.end()));
  });

  migrationCases(async () => ({ sql: pgSqlClient(await connect(await freshDatabase())) }));

  it("applies each migration exactly once when two connections migrate at the same time", async () => {
    const url = await freshDatabase();
    const [a, b] = [pgSqlClient(await connect(url)), pgSqlClient(await connect(url))];
    const results = await Promise.all([migrate(a), migrate(b)]);
    expect(results.toSorted((x, y) => x.length - y.length)).toEqual([[], NAMES]);
    expect((await records(a)).map((r) => r.migration_name)).toEqual(NAMES);
  });
});

describe("migrations on in-memory PGlite", () => {
  const open: PGlite[] = [];

  afterEach(async () => {
    await Promise.all(open.splice(0).map((db) => db.close()));
  });

  migrationCases(async () => {
    const db = new PGlite();
    open.push(db);
    await db.waitReady;
    return { sql: pgliteSqlClient(db) };
  });
});
