/**
 * Embedded storage keeps everything private: after the service has started
 * on a DATA_DIR, written to it and started again, nothing beneath DATA_DIR is
 * readable, writable or searchable by anyone but its owner, including what
 * an earlier version left open.
 */

import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startApp } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { CreateRuleDocument } from "../generated/graphql.js";
import { GraphQLClient } from "../harness/graphql-client.js";

/** Every path beneath `dir` (and `dir` itself) whose mode grants its group or others anything, with that mode. */
function openToOthers(dir: string): string[] {
  const found: string[] = [];
  const visit = (path: string) => {
    const stats = lstatSync(path);
    if ((stats.mode & 0o077) !== 0) found.push(`${(stats.mode & 0o777).toString(8)} ${path}`);
    if (stats.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return found;
}

describe("DATA_DIR", () => {
  const root = mkdtempSync(join(tmpdir(), "floodgate-datadir-"));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("holds nothing that its owner's group or others can reach, after starts, writes and what an earlier version left", async () => {
    const dataDir = join(root, "data");
    // As an earlier version left it: the directory and a file open to everyone.
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    writeFileSync(join(dataDir, "left-by-an-earlier-version"), "x");
    chmodSync(join(dataDir, "left-by-an-earlier-version"), 0o666);

    const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir });
    for (let start = 0; start < 2; start++) {
      const app = await startApp(settings, { logger: pino({ level: "silent" }), announce: () => undefined });
      try {
        const client = new GraphQLClient(app.url, readFileSync(join(dataDir, "admin-token"), "utf8").trim());
        await client.data(CreateRuleDocument, { input: { tenantId: "private", name: `rule-${start}`, limit: 5, window: 60 } });
      } finally {
        await app.close();
      }
    }

    expect(lstatSync(dataDir).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dataDir, "pglite")).length).toBeGreaterThan(0);
    expect(openToOthers(dataDir)).toEqual([]);
  }, 120_000);
});
