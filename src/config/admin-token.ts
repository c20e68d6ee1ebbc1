/**
 * The bootstrap admin token. ADMIN_TOKEN when set. Otherwise, in embedded
 * mode (the one-command try-out), one is generated on the first start, kept
 * in DATA_DIR/admin-token (readable by this user only) and shown once; later
 * starts reuse it and say where it is. With a real database and no
 * ADMIN_TOKEN there is none: API keys are created with an ADMIN_TOKEN first.
 */

import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Settings } from "./settings.js";

export async function resolveAdminToken(settings: Settings, announce: (line: string) => void): Promise<string | null> {
  if (settings.adminToken !== null) return settings.adminToken;
  if (settings.databaseUrl !== null) {
    announce("No ADMIN_TOKEN is set: only existing API keys can call Floodgate.");
    return null;
  }
  if (settings.dataDir === null) {
    const token = generate();
    announce(`Admin token for this run (DATA_DIR=memory:// keeps nothing): ${token}`);
    return token;
  }
  const path = join(settings.dataDir, "admin-token");
  try {
    const token = (await readFile(path, "utf8")).trim();
    announce(`Admin token: the one in ${path} (set ADMIN_TOKEN to choose your own).`);
    return token;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const token = generate();
  await mkdir(settings.dataDir, { recursive: true });
  await writeFile(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  announce(`Generated an admin token, shown only now and kept in ${path}:\n\n    ${token}\n\nSend it as: Authorization: Bearer ${token}`);
  return token;
}

function generate(): string {
  return `fg_admin_${randomBytes(24).toString("base64url")}`;
}
