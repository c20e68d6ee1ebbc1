/**
 * A last-known-good copy of what the database holds, as a JSON file in
 * DATA_DIR: `{ "database": ..., "savedAt": ..., "<name>": [...] }`. Written
 * whole to a temporary file and renamed over the old one, so a crash
 * mid-write never leaves a torn copy; writes run one after another, so the
 * last items asked for are the ones kept. The file is readable by the
 * service's user only (0600): the API keys' copy holds their secrets' hashes.
 *
 * The file names the database its items came from (host, port and database
 * name; never credentials), and only a service using that same database reads
 * it: a DATA_DIR once used with another database (a scratch one, another
 * environment's) must not lend its rules or keys to this one.
 */

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Snapshot } from "../domain/ports.js";

export class SnapshotFile<T> implements Snapshot<T> {
  private writing: Promise<void> = Promise.resolve();
  private readonly database: string;

  /**
   * `name`: the field holding the items ("rules", "keys"); `revive`: an item
   * as JSON left it (dates as strings) made whole again.
   */
  constructor(
    readonly path: string,
    databaseUrl: string,
    private readonly name: string,
    private readonly revive: (stored: never) => T,
  ) {
    this.database = databaseIdentity(databaseUrl);
  }

  async read(): Promise<{ items: T[]; savedAt: Date } | null> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    // Absent in snapshots written before the file named its database: those are not trusted.
    const file = JSON.parse(text) as { database?: string; savedAt: string } & Record<string, unknown>;
    if (file.database !== this.database) return null;
    return { items: (file[this.name] as never[]).map(this.revive), savedAt: new Date(file.savedAt) };
  }

  write(items: readonly T[]): Promise<void> {
    const text = JSON.stringify({ database: this.database, savedAt: new Date().toISOString(), [this.name]: items });
    const written = this.writing.then(() => this.replace(text));
    this.writing = written.catch(() => undefined);
    return written;
  }

  private async replace(text: string): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.tmp`;
    await writeFile(temporary, text, { mode: 0o600 });
    await rename(temporary, this.path);
  }
}

/** host:port/database of a Postgres URL, without user or password. */
function databaseIdentity(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  return `${url.hostname}:${url.port || "5432"}${url.pathname}`;
}
