/** A scratch Postgres database holding rules (and overrides) as Floodgate stores them, dropped by the cleanups. */

import { openDatabase } from "../../src/db/database.js";
import { ruleRowOf } from "../../src/db/prisma-rule-repository.js";
import type { Rule } from "../../src/domain/rule.js";
import { createScratchDatabase } from "../../test/harness/scratch-database.js";
import type { OverrideRow } from "./workload.js";

/**
 * Rows per createMany: few enough that one INSERT's parameters stay under Postgres's
 * 32,767. Past it Prisma splits the statement into chunks and sends them at once on one
 * connection, which pg 8.19 warns is deprecated (pg 9 will refuse it).
 */
const ROWS_PER_INSERT = 1_000;

export async function seededDatabase(purpose: string, rules: Rule[], cleanups: (() => Promise<unknown>)[], overrides: readonly OverrideRow[] = []): Promise<{ url: string }> {
  const scratch = await createScratchDatabase(purpose);
  cleanups.push(() => scratch.drop());
  const database = await openDatabase({ kind: "postgres", url: scratch.url });
  try {
    await database.migrate();
    const rows = rules.map(ruleRowOf);
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) await database.prisma.rule.createMany({ data: rows.slice(i, i + ROWS_PER_INSERT) });
    for (let i = 0; i < overrides.length; i += ROWS_PER_INSERT) await database.prisma.ruleOverride.createMany({ data: overrides.slice(i, i + ROWS_PER_INSERT) });
  } finally {
    await database.close();
  }
  return scratch;
}
