/**
 * Opens the rule database: Postgres when a URL is given, else an embedded
 * PGlite in a directory. Either way the migrations are applied first and the
 * Prisma client runs on a driver adapter (no native query engine).
 */

import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/client.js";
import { migrate } from "./migrations.js";
import { pgliteSqlClient, pgSqlClient } from "./sql-client.js";

export type DatabaseTarget = { kind: "postgres"; url: string } | { kind: "pglite"; dataDir: string | null };

export interface Database {
  prisma: PrismaClient;
  /** "postgres (host/db)" or "embedded PGlite (dir)", for the start-up line. */
  description: string;
  /** Migrations applied by this open. */
  applied: string[];
  close(): Promise<void>;
}

export async function openDatabase(target: DatabaseTarget): Promise<Database> {
  return target.kind === "postgres" ? openPostgres(target.url) : openPglite(target.dataDir);
}

async function openPostgres(url: string): Promise<Database> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let applied: string[];
  try {
    applied = await migrate(pgSqlClient(client));
  } finally {
    await client.end();
  }
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
  const where = new URL(url);
  return {
    prisma,
    description: `postgres (${where.host}${where.pathname})`,
    applied,
    close: () => prisma.$disconnect(),
  };
}

async function openPglite(dataDir: string | null): Promise<Database> {
  if (dataDir !== null) mkdirSync(dataDir, { recursive: true });
  const db = dataDir === null ? new PGlite() : new PGlite(dataDir);
  await db.waitReady;
  const applied = await migrate(pgliteSqlClient(db));
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) });
  return {
    prisma,
    description: dataDir === null ? "embedded PGlite (in memory)" : `embedded PGlite (${dataDir})`,
    applied,
    close: async () => {
      await prisma.$disconnect();
      await db.close();
    },
  };
}
