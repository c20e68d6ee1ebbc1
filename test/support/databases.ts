/** Databases for the suites that run the database code on both Postgres and in-memory PGlite. Call these in a describe's body. */

import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
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

/** What a case of a repository suite works with: a fresh repository, and the clock it reads, which only the case moves. */
export interface RepositoryOnManualClock {
  repo: PrismaRuleRepository;
  clock: ManualClock;
}

/**
 * Opens and migrates a database from `target`, either one per case (each case
 * starts from an empty database) or one shared by the describe's cases (faster;
 * the cases must keep out of each other's way), and gives every case a fresh
 * repository over it whose clock stands at `start` until the case moves it.
 */
export function repositoryOnManualClock(
  target: () => Promise<DatabaseTarget>,
  start: number,
  databasePer: "case" | "describe",
): RepositoryOnManualClock {
  const subject = {} as RepositoryOnManualClock;
  let database: Database | undefined;
  const open = async () => {
    database = await openDatabase(await target());
    await database.migrate();
  };
  const close = async () => {
    await database?.close();
  };
  if (databasePer === "case") {
    beforeEach(open);
    afterEach(close);
  } else {
    beforeAll(open);
    afterAll(close);
  }
  beforeEach(() => {
    subject.clock = new ManualClock(start);
    subject.repo = new PrismaRuleRepository(database!.prisma, () => new Date(subject.clock.now()));
  });
  return subject;
}
