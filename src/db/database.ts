/**
 * Opens the rule database: Postgres when a URL is given, else an embedded
 * PGlite in a directory. The Prisma client runs on a driver adapter (no native
 * query engine). Opening Postgres needs no connection yet, so the service can
 * start while it is down; migrate() applies the migrations once it answers.
 */

import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/client.js";
import { migrate } from "./migrations.js";
import { unavailable } from "./unavailable.js";
import { pgliteSqlClient, pgSqlClient } from "./sql-client.js";

export type DatabaseTarget = { kind: "postgres"; url: string } | { kind: "pglite"; dataDir: string | null };

export interface Database {
  prisma: PrismaClient;
  /** "postgres (host/db)" or "embedded PGlite (dir)", for the start-up line. */
  description: string;
  /** Applies the migrations not yet applied; returns their names. */
  migrate(): Promise<string[]>;
  close(): Promise<void>;
}

/** How long a connection attempt to Postgres may take before the call fails as unavailable. */
const CONNECT_TIMEOUT_MS = 2000;

export async function openDatabase(target: DatabaseTarget): Promise<Database> {
  return target.kind === "postgres" ? openPostgres(target.url) : openPglite(target.dataDir);
}

async function openPostgres(url: string): Promise<Database> {
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS }) });
  const where = new URL(url);
  return {
    prisma,
    description: `postgres (${where.host}${where.pathname})`,
    migrate: async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
      try {
        await client.connect();
        return await migrate(pgSqlClient(client));
      } catch (error) {
        throw unavailable(error) ?? error;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    close: () => prisma.$disconnect(),
  };
}

async function openPglite(dataDir: string | null): Promise<Database> {
  if (dataDir !== null) mkdirSync(dataDir, { recursive: true });
  const db = dataDir === null ? new PGlite() : new PGlite(dataDir);
  await db.waitReady;
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) });
  return {
    prisma,
    description: dataDir === null ? "embedded PGlite (in memory)" : `embedded PGlite (${dataDir})`,
    migrate: () => migrate(pgliteSqlClient(db)),
    close: async () => {
      await prisma.$disconnect();
      await db.close();
    },
  };
}
