/**
 * The last-known-good rules as a JSON file. Written whole to a temporary file
 * and renamed over the old one, so a crash mid-write never leaves a torn copy.
 */

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { RuleSnapshot } from "../domain/ports.js";
import type { Rule } from "../domain/rule.js";

interface SnapshotFile {
  savedAt: string;
  rules: (Omit<Rule, "createdAt" | "updatedAt"> & { createdAt: string; updatedAt: string })[];
}

export class RuleSnapshotFile implements RuleSnapshot {
  constructor(readonly path: string) {}

  async read(): Promise<{ rules: Rule[]; savedAt: Date } | null> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    const file = JSON.parse(text) as SnapshotFile;
    return {
      savedAt: new Date(file.savedAt),
      rules: file.rules.map((r) => ({ ...r, createdAt: new Date(r.createdAt), updatedAt: new Date(r.updatedAt) })),
    };
  }

  async write(rules: readonly Rule[]): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify({ savedAt: new Date().toISOString(), rules }));
    await rename(temporary, this.path);
  }
}
