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

/**
 * `file` (relative to the repository, e.g. "src/domain/glob.ts") as it was at
 * `ref`. A file that has moved is given as its paths, newest first: the first
 * one that exists at `ref` is taken, and its copy sits where it sat then, so
 * that its relative imports still resolve.
 */
export async function importOldVersion<T>(ref: string, paths: string | readonly string[]): Promise<{ module: T; remove(): Promise<void> }> {
  const { file, stdout } = await showFirst(ref, typeof paths === "string" ? [paths] : paths);
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

async function showFirst(ref: string, paths: readonly string[]): Promise<{ file: string; stdout: string }> {
  for (const [i, file] of paths.entries()) {
    try {
      const { stdout } = await run("git", ["show", `${ref}:${file}`], { cwd: ROOT, maxBuffer: 1 << 24 });
      return { file, stdout };
    } catch (error) {
      if (i === paths.length - 1) throw error;
    }
  }
  throw new Error("importOldVersion: no path given");
}
