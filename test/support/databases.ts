/** Databases for the suites that run the database code on both Postgres and in-memory PGlite. Call these in a describe's body. */

import { afterAll, beforeAll, beforeEach } from "vitest";
import { openDatabase, type Database, type DatabaseTarget } from "../../src/db/database.js";
import { PrismaRuleRepository } from "../../src/db/prisma-rule-repository.js";
import { ManualClock } from "./clock.js";
import { createTestDatabase } from "./services.js";

/** A maker of fresh Postgres databases (it returns each one's URL), all of them dropped after the describe's last case. */
export function freshPostgresDatabases(): () => Promise<string> {
  const drops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const drop of drops.splice(0)) await drop();
  });
  return async () => {
    const database = await createTestDatabase();
    drops.push(() => database.drop());
    return database.url;
  };
}

/**
 * A database opened from `target` and migrated once, for a describe's cases.
 * With "case" every case starts from an empty database: before each, every
 * table but the migrations' is emptied (TRUNCATE ... RESTART IDENTITY), as a
 * freshly migrated database has them, without opening and migrating one per
 * case (about 2.5 s a case on PGlite, 0.5 s on Postgres). With "describe" the
 * cases share what they write, and must keep out of each other's way.
 */
export function migratedDatabase(target: () => Promise<DatabaseTarget>, emptyBefore: "case" | "describe"): () => Database {
  let database: Database | undefined;
  beforeAll(async () => {
    database = await openDatabase(await target());
    await database.migrate();
  });
  afterAll(async () => {
    await database?.close();
  });
  if (emptyBefore === "case") beforeEach(() => emptyTables(database!));
  return () => database!;
}

async function emptyTables({ prisma }: Database): Promise<void> {
  const tables = await prisma.$queryRawUnsafe<{ tablename: string }[]>(
    `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> '_prisma_migrations'`,
  );
  if (tables.length === 0) return;
  await prisma.$executeRawUnsafe(`TRUNCATE TABLE ${tables.map(({ tablename }) => `"${tablename}"`).join(", ")} RESTART IDENTITY CASCADE`);
}

/** What a case of a repository suite works with: a fresh repository, and the clock it reads, which only the case moves. */
export interface RepositoryOnManualClock {
  repo: PrismaRuleRepository;
  clock: ManualClock;
}

/**
 * A rule repository for every case over a migratedDatabase (emptied before
 * each case, or shared by the describe's cases), whose clock stands at
 * `start` until the case moves it.
 */
export function repositoryOnManualClock(
  target: () => Promise<DatabaseTarget>,
  start: number,
  databasePer: "case" | "describe",
): RepositoryOnManualClock {
  const subject = {} as RepositoryOnManualClock;
  const database = migratedDatabase(target, databasePer);
  beforeEach(() => {
    subject.clock = new ManualClock(start);
    subject.repo = new PrismaRuleRepository(database().prisma, () => new Date(subject.clock.now()));
  });
  return subject;
}
