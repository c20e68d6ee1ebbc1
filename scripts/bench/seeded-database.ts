/** A scratch Postgres database holding rules (and overrides) as Floodgate stores them, dropped by the cleanups. */

import { openDatabase } from "../../src/db/database.js";
import { ruleRowOf } from "../../src/db/prisma-rule-repository.js";
import type { Rule } from "../../src/domain/rule.js";
import { createScratchDatabase } from "../../test/harness/scratch-database.js";
import type { OverrideRow } from "./workload.js";

export async function seededDatabase(purpose: string, rules: Rule[], cleanups: (() => Promise<unknown>)[], overrides: readonly OverrideRow[] = []): Promise<{ url: string }> {
  const scratch = await createScratchDatabase(purpose);
  cleanups.push(() => scratch.drop());
  const database = await openDatabase({ kind: "postgres", url: scratch.url });
  try {
    await database.migrate();
    await database.prisma.rule.createMany({ data: rules.map(ruleRowOf) });
    for (let i = 0; i < overrides.length; i += 10_000) await database.prisma.ruleOverride.createMany({ data: overrides.slice(i, i + 10_000) });
  } finally {
    await database.close();
  }
  return scratch;
}
