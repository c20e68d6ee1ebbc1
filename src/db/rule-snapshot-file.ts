/** The last-known-good rules, for starting while the rule database is down (see snapshot-file.ts). */

import type { Rule } from "../domain/rule.js";
import { SnapshotFile } from "./snapshot-file.js";

type StoredRule = Omit<Rule, "createdAt" | "updatedAt"> & { createdAt: string; updatedAt: string };

export class RuleSnapshotFile extends SnapshotFile<Rule> {
  constructor(path: string, databaseUrl: string) {
    super(path, databaseUrl, "rules", (rule: StoredRule) => ({ ...rule, createdAt: new Date(rule.createdAt), updatedAt: new Date(rule.updatedAt) }));
  }
}
