/**
 * The little raw SQL the service needs outside Prisma: running migration
 * files (several statements each, which Prisma's query API does not take).
 */

import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";

export interface SqlClient {
  /** Runs a script of one or more statements. */
  exec(sql: string): Promise<void>;
  query<T extends object>(sql: string, params?: unknown[]): Promise<T[]>;
}

export function pgSqlClient(client: pg.Client): SqlClient {
  return {
    exec: async (sql) => {
      await client.query(sql);
    },
    query: async <T extends object>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as T[],
  };
}

export function pgliteSqlClient(db: PGlite): SqlClient {
  return {
    exec: async (sql) => {
      await db.exec(sql);
    },
    query: async <T extends object>(sql: string, params: unknown[] = []) => (await db.query<T>(sql, params)).rows,
  };
}
