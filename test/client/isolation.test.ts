/**
 * Importing floodgate/client loads none of the server's modules or
 * dependencies, in Node and in a fetch runtime. The built package is imported
 * by its name in a child Node process whose module resolution hook records
 * every URL it resolves, and the client makes a real check there.
 */

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));
const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));

/** The server's dependencies and its own layers: none may load with the client. */
const SERVER_DEPENDENCIES = ["@apollo", "@prisma", "@electric-sql", "ioredis", "graphql", "graphql-jit", "type-graphql", "pg", "pino", "prom-client", "dataloader", "reflect-metadata"];
const SERVER_LAYERS = ["server", "api", "engine", "db", "store"];

let t: TestApp;
let scratch: string;

beforeAll(async () => {
  // What users import is the build: compile it (incrementally) as npm run build does.
  await run("npm", ["run", "build", "--silent"], { cwd: root });
  t = await startTestApp("embedded");
  scratch = mkdtempSync(join(tmpdir(), "floodgate-loads-"));
}, 300_000);

afterAll(async () => {
  await t?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Imports the client in a child process with extra node arguments; returns what it resolved and the decision it printed. */
async function importClient(name: string, nodeArguments: string[]): Promise<{ loads: string[]; decision: { allowed: boolean; source: unknown } }> {
  const loadsFile = join(scratch, `${name}.txt`);
  const { stdout } = await run(process.execPath, [...nodeArguments, "--import", join(fixtures, "record-loads.mjs"), join(fixtures, "check-once.mjs")], {
    cwd: root,
    env: { ...process.env, LOADS_FILE: loadsFile, FLOODGATE_URL: t.app.url, FLOODGATE_TOKEN: t.adminToken },
  });
  const loads = [...new Set(readFileSync(loadsFile, "utf8").split("\n").filter((line) => line !== ""))];
  return { loads, decision: JSON.parse(stdout) };
}

function serverModules(loads: string[]): string[] {
  return loads.filter(
    (url) =>
      SERVER_DEPENDENCIES.some((dependency) => url.includes(`/node_modules/${dependency}/`)) ||
      SERVER_LAYERS.some((layer) => url.includes(`/dist/${layer}/`) || url.includes(`/src/${layer}/`)),
  );
}

describe("importing floodgate/client", () => {
  it("in Node loads the client, undici and ws, and nothing of the server", async () => {
    const { loads, decision } = await importClient("node", []);
    expect(decision).toMatchObject({ allowed: true, source: null });
    expect(loads.some((url) => url.endsWith("/dist/client/index.js"))).toBe(true);
    expect(loads.some((url) => url.endsWith("/dist/client/platform/node.js"))).toBe(true);
    expect(loads.some((url) => url.includes("/node_modules/undici/"))).toBe(true);
    expect(loads.some((url) => url.includes("/node_modules/ws/"))).toBe(true);
    expect(serverModules(loads)).toEqual([]);
  }, 60_000);

  it("in a fetch runtime (the workerd condition) loads no undici, no ws and no Node builtin, and checks over fetch", async () => {
    const { loads, decision } = await importClient("workerd", ["--conditions=workerd"]);
    expect(decision).toMatchObject({ allowed: true, source: null });
    expect(loads.some((url) => url.endsWith("/dist/client/platform/fetch.js"))).toBe(true);
    expect(loads.filter((url) => url.includes("/node_modules/undici/") || url.includes("/node_modules/ws/") || url.startsWith("node:"))).toEqual([]);
    expect(serverModules(loads)).toEqual([]);
  }, 60_000);
});
