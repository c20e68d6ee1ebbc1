/**
 * The last-known-good rules as a JSON file. Written whole to a temporary file
 * and renamed over the old one, so a crash mid-write never leaves a torn copy;
 * writes run one after another, so the last rules asked for are the ones kept.
 *
 * The file names the database its rules came from (host, port and database
 * name; never credentials), and only a service using that same database starts
 * from it: a DATA_DIR once used with another database (a scratch one, another
 * environment's) must not lend its rules to this one.
 */

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { RuleSnapshot } from "../domain/ports.js";
import type { Rule } from "../domain/rule.js";

interface SnapshotFile {
  /** Absent in snapshots written before the file named its database: those are not trusted. */
  database?: string;
  savedAt: string;
  rules: (Omit<Rule, "createdAt" | "updatedAt"> & { createdAt: string; updatedAt: string })[];
}

export class RuleSnapshotFile implements RuleSnapshot {
  private writing: Promise<void> = Promise.resolve();
  private readonly database: string;

  constructor(
    readonly path: string,
    databaseUrl: string,
  ) {
    this.database = databaseIdentity(databaseUrl);
  }

  async read(): Promise<{ rules: Rule[]; savedAt: Date } | null> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    const file = JSON.parse(text) as SnapshotFile;
    if (file.database !== this.database) return null;
    return {
      savedAt: new Date(file.savedAt),
      rules: file.rules.map((r) => ({ ...r, createdAt: new Date(r.createdAt), updatedAt: new Date(r.updatedAt) })),
    };
  }

  write(rules: readonly Rule[]): Promise<void> {
    const text = JSON.stringify({ database: this.database, savedAt: new Date().toISOString(), rules });
    const written = this.writing.then(() => this.replace(text));
    this.writing = written.catch(() => undefined);
    return written;
  }

  private async replace(text: string): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.tmp`;
    await writeFile(temporary, text);
    await rename(temporary, this.path);
  }
}

/** host:port/database of a Postgres URL, without user or password. */
function databaseIdentity(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  return `${url.hostname}:${url.port || "5432"}${url.pathname}`;
}
