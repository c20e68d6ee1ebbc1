/** The last-known-good access list entries, so that an instance starting while the database is down still enforces them (see snapshot-file.ts). */

import type { ListEntry } from "../domain/access-list.js";
import { SnapshotFile } from "./snapshot-file.js";

type StoredEntry = Omit<ListEntry, "createdAt" | "expiresAt"> & { createdAt: string; expiresAt: string | null };

export class AccessListSnapshotFile extends SnapshotFile<ListEntry> {
  constructor(path: string, databaseUrl: string) {
    super(path, databaseUrl, "entries", (entry: StoredEntry) => ({
      ...entry,
      createdAt: new Date(entry.createdAt),
      expiresAt: entry.expiresAt === null ? null : new Date(entry.expiresAt),
    }));
  }
}
