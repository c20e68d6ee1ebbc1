/**
 * A source file as it was at another git ref, imported for a side-by-side
 * comparison with the current one (the benches' --old). It is written beside
 * the current file, under a name of its own, so that its relative imports
 * resolve; remove() deletes it again.
 */

import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The --old <git ref> of a bench's command line; main by default. */
export function oldRef(): string {
  const i = process.argv.indexOf("--old");
  return i > 0 ? process.argv[i + 1]! : "main";
}

/** `file` (relative to the repository, e.g. "src/domain/glob.ts") as it was at `ref`. */
export async function importOldVersion<T>(ref: string, file: string): Promise<{ module: T; remove(): Promise<void> }> {
  const { stdout } = await run("git", ["show", `${ref}:${file}`], { cwd: ROOT, maxBuffer: 1 << 24 });
  const copy = join(ROOT, file.replace(/\.ts$/, `.old-${randomUUID()}.ts`));
  await writeFile(copy, stdout);
  const remove = () => rm(copy, { force: true });
  try {
    return { module: (await import(copy)) as T, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}
