/**
 * The last-known-good API keys, for authenticating the keys known before the
 * database went down (see snapshot-file.ts): each key's secret hash, who it is
 * and when it was revoked. Never a secret: only its sha256, which is what the
 * database holds too; the file is readable by the service's user only.
 */

import type { ApiKeyCredential } from "../domain/ports.js";
import { SnapshotFile } from "./snapshot-file.js";

type StoredCredential = Omit<ApiKeyCredential, "revokedAt"> & { revokedAt: string | null };

export class ApiKeySnapshotFile extends SnapshotFile<ApiKeyCredential> {
  constructor(path: string, databaseUrl: string) {
    super(path, databaseUrl, "keys", (key: StoredCredential) => ({ ...key, revokedAt: key.revokedAt === null ? null : new Date(key.revokedAt) }));
  }
}
