/**
 * DATA_DIR holds the embedded rule database, the generated admin token and
 * the rule snapshot: only the user running the service may read or write
 * any of it.
 *
 * Two layers, because PGlite does not leave file modes to its caller: as it
 * starts it chmods the files it unpacks to 0666 (and its relation cache file
 * to 0644), so neither a umask nor a mode on our own writes covers them.
 *   - DATA_DIR itself is 0700 (made so on every start, also when an earlier
 *     version created it open): nobody else can reach anything beneath it,
 *     whatever the files' own modes.
 *   - The files are private too: once PGlite has started, every entry
 *     beneath DATA_DIR loses its group and other bits, and the process umask
 *     is 077, so what PGlite or the service creates later is born private.
 *     The umask is process-wide on purpose: this process writes no file
 *     that anyone else should read.
 */

import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

const OWNER_ONLY = 0o077;

/** Creates DATA_DIR (or takes an existing one) as 0700, and makes every file this process creates from now on private. */
export function openPrivateDataDir(dir: string): void {
  process.umask(process.umask(OWNER_ONLY) | OWNER_ONLY);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** Takes group and other access away from every file and directory beneath `dir` (symbolic links are left alone: chmod would follow them). */
export function removeForeignAccess(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) continue;
    if ((stats.mode & OWNER_ONLY) !== 0) chmodSync(path, stats.mode & 0o7700);
    if (stats.isDirectory()) removeForeignAccess(path);
  }
}
