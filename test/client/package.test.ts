/**
 * The built package as users import it, by its name, in child Node
 * processes. Importing floodgate/client loads none of the server's modules
 * or dependencies, in Node and in a fetch runtime: a module resolution hook
 * records every URL the process resolves, and the client makes a real check
 * there. And the README's Express example, run as it is written, answers 429
 * with the headers and the problem details body.
 */

import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { apiKey } from "../support/floodgate-clients.js";
import { freePort } from "../harness/free-port.js";

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

describe("the README's Express example", () => {
  it("limits an Express app in under 10 lines: the sixth request of a minute gets 429 with headers and body", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Client and middleware"));
    const example = /```js\n([\s\S]*?)```/.exec(section)![1]!;
    expect(example.trim().split("\n").length).toBeLessThan(10);
    // Inside the package (dist is), so that "floodgate/express" resolves to the package itself.
    const file = join(root, "dist", "readme-example.mjs");
    writeFileSync(file, example);
    const { CreateRuleDocument } = await import("../generated/graphql.js");
    await t.client.data(CreateRuleDocument, { input: { tenantId: "acme", name: "per-ip", scope: ["IP"], limit: 5, window: 1, windowUnit: "MINUTES" } });
    const port = await freePort();
    const app = spawn(process.execPath, [file], {
      cwd: root,
      env: { ...process.env, FLOODGATE_URL: t.app.url, FLOODGATE_TOKEN: await apiKey(t.client, "acme"), PORT: String(port) },
      stdio: "ignore",
    });
    try {
      const get = () => fetch(`http://127.0.0.1:${port}/api/orders`);
      for (let attempt = 0; ; attempt++) {
        const started = await get().then(() => true, () => false);
        if (started) break;
        if (attempt > 200) throw new Error("the example app never listened");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // The probe that found it listening was the first request.
      for (let i = 2; i <= 5; i++) expect((await get()).status).toBe(200);
      const denied = await get();
      expect(denied.status).toBe(429);
      expect(denied.headers.get("content-type")).toBe("application/problem+json");
      expect(denied.headers.get("x-ratelimit-limit")).toBe("5");
      expect(denied.headers.get("ratelimit-policy")).toMatch(/^"per-ip";q=5;w=60;pk=:[A-Za-z0-9+/]+=*:$/);
      const retryAfter = Number(denied.headers.get("retry-after"));
      expect(await denied.json()).toMatchObject({ status: 429, rule: "per-ip", retry_after: retryAfter, error: { code: "RATE_LIMIT_EXCEEDED", retry_after: retryAfter } });
    } finally {
      app.kill();
      rmSync(file, { force: true });
    }
  }, 60_000);
});
