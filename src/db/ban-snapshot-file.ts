/** The last-known-good live bans, so that an instance starting while the database is down still enforces them (see snapshot-file.ts). */

import type { Ban } from "../domain/ban.js";
import { SnapshotFile } from "./snapshot-file.js";

type StoredBan = Omit<Ban, "createdAt" | "until"> & { createdAt: string; until: string };

export class BanSnapshotFile extends SnapshotFile<Ban> {
  constructor(path: string, databaseUrl: string) {
    super(path, databaseUrl, "bans", (ban: StoredBan) => ({ ...ban, createdAt: new Date(ban.createdAt), until: new Date(ban.until) }));
  }
}
