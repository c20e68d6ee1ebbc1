/**
 * Rules as code: importRules and exportRules over HTTP, the rules file loaded
 * on start (RULES_FILE), and `npm run rules` against a running server and
 * straight against the database.
 */

import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runRulesCommand } from "../../src/cli/rules-command.js";
import { SettingsError } from "../../src/config/settings.js";
import { ExportRulesDocument, ImportRulesDocument, ListRulesDocument, RuleHistoryDocument } from "../generated/graphql.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { aliasBomb } from "../harness/hostile-input.js";
import { check, createRule, describeOnEachStorage, newTenant, realStorageAvailable } from "../support/api.js";

const realAvailable = await realStorageAvailable();

/** A valid file of two rules for the tenant; the second is a shadow rule on /api/**. */
function validFile(tenantId: string): string {
  return `# two rules
rules:
  - tenantId: ${tenantId}
    name: per-user
    scope: [USER]
    limit: 2
    window: 1
    windowUnit: HOURS

  - tenantId: ${tenantId}
    name: api shadow
    scope: [IP]
    resource: /api/**
    limit: 100
    window: 1
    windowUnit: MINUTES
    action: LOG_ONLY
`;
}

/** One valid rule, then three mistakes on lines 10, 14 and 20. */
function fileWithThreeErrors(tenantId: string): string {
  return `rules:
  - tenantId: ${tenantId}
    name: would be fine
    limit: 5
    window: 1

  - tenantId: ${tenantId}
    name: per-user
    scope: [USER]
    limit: 0
    window: 1

  - tenantId: ${tenantId}
    name: ""
    limit: 5
    window: 1

  - tenantId: ${tenantId}
    name: per-ip
    method: FETCH
    limit: 5
    window: 1
`;
}

async function importRules(client: GraphQLClient, yaml: string, dryRun?: boolean) {
  return (await client.data(ImportRulesDocument, { yaml, dryRun })).importRules;
}

async function exportRules(client: GraphQLClient, tenantId: string | null) {
  return (await client.data(ExportRulesDocument, { tenantId })).exportRules;
}

async function rulesOf(client: GraphQLClient, tenantId: string) {
  return (await client.data(ListRulesDocument, { tenantId })).rules;
}

await describeOnEachStorage("importRules and exportRules over HTTP", (suite) => {
  it("imports a valid file: every rule created, with the line of its entry, and enforced at once", async () => {
    const tenantId = newTenant();
    const report = await importRules(suite.client, validFile(tenantId));
    expect(report).toMatchObject({ dryRun: false, applied: true, updated: [], unchanged: [], invalid: [] });
    expect(report.created.map((r) => [r.name, r.line, r.rule?.version])).toEqual([
      ["per-user", 3, 1],
      ["api shadow", 10, 1],
    ]);
    expect((await rulesOf(suite.client, tenantId)).map((r) => [r.name, r.action, r.resource])).toEqual([
      ["api shadow", "LOG_ONLY", "/api/**"],
      ["per-user", "REJECT", null],
    ]);
    await check(suite.client, { tenantId, userId: "u1" });
    await check(suite.client, { tenantId, userId: "u1" });
    expect((await check(suite.client, { tenantId, userId: "u1" })).allowed).toBe(false);
  });

  it("in a dry run reports what it would do and writes nothing", async () => {
    const tenantId = newTenant();
    const report = await importRules(suite.client, validFile(tenantId), true);
    expect(report).toMatchObject({ dryRun: true, applied: false, invalid: [] });
    expect(report.created.map((r) => [r.name, r.rule])).toEqual([
      ["per-user", null],
      ["api shadow", null],
    ]);
    expect(await rulesOf(suite.client, tenantId)).toEqual([]);
  });

  it("reports all three errors of a file with their lines and fields, and applies nothing of it", async () => {
    const tenantId = newTenant();
    const report = await importRules(suite.client, fileWithThreeErrors(tenantId));
    expect(report.applied).toBe(false);
    expect(report.invalid).toEqual([
      { line: 10, column: 12, field: "rules[1].limit", message: "rules[1].limit must be at least 1 (got 0)" },
      { line: 14, column: 11, field: "rules[2].name", message: "rules[2].name must not be empty" },
      {
        line: 20,
        column: 13,
        field: "rules[3].method",
        message: 'rules[3].method must be one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH (got "FETCH")',
      },
    ]);
    expect(report.created.map((r) => [r.name, r.line, r.rule])).toEqual([["would be fine", 2, null]]);
    expect(await rulesOf(suite.client, tenantId)).toEqual([]);
  });

  it("reports a YAML alias bomb like any other problem of the file, with its line and column, and applies nothing", async () => {
    const tenantId = newTenant();
    const response = await suite.client.request(ImportRulesDocument, { yaml: aliasBomb(tenantId) });
    expect(response.errors).toBeUndefined();
    expect(response.data!.importRules.applied).toBe(false);
    expect(response.data!.importRules.invalid).toContainEqual({
      line: 7,
      column: 12,
      field: "rules[0].scope",
      message: "rules[0].scope cannot be read: Excessive alias count indicates a resource exhaustion attack",
    });
    expect(await rulesOf(suite.client, tenantId)).toEqual([]);
  });

  it("re-imports an export as unchanged: same rules, same versions, and the same export again", async () => {
    const tenantId = newTenant();
    await importRules(suite.client, validFile(tenantId));
    await createRule(suite.client, {
      tenantId,
      name: "every field",
      scope: ["TENANT", "API_KEY", "ENDPOINT"],
      resource: "/files/*.pdf",
      method: "GET",
      algorithm: "LEAKY_BUCKET",
      limit: 7,
      window: 3,
      windowUnit: "DAYS",
      burst: 9,
      action: "THROTTLE",
      failureMode: "CLOSED",
      priority: -4,
      enabled: false,
    });
    const before = await rulesOf(suite.client, tenantId);
    const exported = await exportRules(suite.client, tenantId);
    const report = await importRules(suite.client, exported);
    expect(report).toMatchObject({ applied: true, created: [], updated: [], invalid: [] });
    expect(report.unchanged.map((r) => r.name).sort()).toEqual(["api shadow", "every field", "per-user"]);
    expect(await rulesOf(suite.client, tenantId)).toEqual(before);
    expect(await exportRules(suite.client, tenantId)).toBe(exported);
  });

  it("updates only what changed, and the history says it came from a rules file", async () => {
    const tenantId = newTenant();
    await importRules(suite.client, validFile(tenantId));
    const report = await importRules(suite.client, validFile(tenantId).replace("limit: 2", "limit: 3"));
    expect(report.updated.map((r) => [r.name, r.rule?.version, r.rule?.limit])).toEqual([["per-user", 2, 3]]);
    expect(report.unchanged.map((r) => r.name)).toEqual(["api shadow"]);
    const history = (await suite.client.data(RuleHistoryDocument, { id: report.updated[0]!.rule!.id })).ruleHistory;
    expect(history.map((r) => [r.version, r.note])).toEqual([
      [1, "imported from a rules file"],
      [2, "imported from a rules file"],
    ]);
  });

  it("exports one tenant's rules, or every tenant's", async () => {
    const [first, second] = [newTenant(), newTenant()];
    await createRule(suite.client, { tenantId: first, name: "a", limit: 1, window: 1 });
    await createRule(suite.client, { tenantId: second, name: "b", limit: 1, window: 1 });
    const mine = await exportRules(suite.client, first);
    expect(mine).toContain(`tenantId: ${first}`);
    expect(mine).not.toContain(second);
    const all = await exportRules(suite.client, null);
    expect(all).toContain(`tenantId: ${first}`);
    expect(all).toContain(`tenantId: ${second}`);
  });
});

describe("the rules file given on start (RULES_FILE)", () => {
  // Real storage starts faster than embedded PGlite, whose database is created from scratch each time.
  const storage = realAvailable ? "real" : "embedded";
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "floodgate-rules-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("is imported before the service serves", async () => {
    const tenantId = newTenant();
    const file = join(dir, "valid.yaml");
    await writeFile(file, validFile(tenantId));
    const t = await startTestApp(storage, { RULES_FILE: file });
    try {
      expect((await rulesOf(t.client, tenantId)).map((r) => r.name)).toEqual(["api shadow", "per-user"]);
    } finally {
      await t.stop();
    }
  });

  it("stops the start when invalid, listing every problem as file:line:column", async () => {
    const file = join(dir, "invalid.yaml");
    await writeFile(file, fileWithThreeErrors(newTenant()));
    await expect(startTestApp(storage, { RULES_FILE: file })).rejects.toThrow(
      `RULES_FILE ${file} is invalid, so none of it was applied:\n` +
        `  ${file}:10:12: rules[1].limit must be at least 1 (got 0)\n` +
        `  ${file}:14:11: rules[2].name must not be empty\n` +
        `  ${file}:20:13: rules[3].method must be one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH (got "FETCH")`,
    );
  });

  it("stops the start on a YAML alias bomb with the problem as file:line:column, not a stack", async () => {
    const file = join(dir, "bomb.yaml");
    await writeFile(file, aliasBomb(newTenant()));
    const start = startTestApp(storage, { RULES_FILE: file });
    await expect(start).rejects.toBeInstanceOf(SettingsError);
    await expect(start).rejects.toThrow(
      `RULES_FILE ${file} is invalid, so none of it was applied:\n` +
        `  ${file}:1:1: laughs is not a field of a rules file: it holds only \`rules:\` and \`lists:\`\n` +
        `  ${file}:7:12: rules[0].scope cannot be read: Excessive alias count indicates a resource exhaustion attack`,
    );
  });
});

describe.runIf(realAvailable)("npm run rules", () => {
  let t: TestApp;
  let dir: string;

  beforeAll(async () => {
    t = await startTestApp("real");
    dir = await mkdtemp(join(tmpdir(), "floodgate-cli-"));
  });

  afterAll(async () => {
    await t?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function run(args: string[], env: NodeJS.ProcessEnv = {}) {
    let out = "";
    let err = "";
    const code = await runRulesCommand(args, env, { out: (text) => (out += text), err: (text) => (err += text), logger: pino({ level: "silent" }) });
    return { code, out, err };
  }

  /** What the server's own settings point at: the same database and Redis prefix, as an operator's shell would. */
  const databaseEnv = () => ({
    DATABASE_URL: t.settings.databaseUrl!,
    REDIS_URL: t.settings.redis?.kind === "single" ? t.settings.redis.url : "",
    REDIS_KEY_PREFIX: t.settings.redisKeyPrefix,
    DATA_DIR: "memory://",
  });

  it("validate, import and export against a running server", async () => {
    const tenantId = newTenant();
    const file = join(dir, "server.yaml");
    await writeFile(file, validFile(tenantId));
    expect(await run(["validate", file, "--url", t.app.url, "--token", t.adminToken])).toEqual({
      code: 0,
      out: `  created   ${tenantId} / per-user (line 3)\n  created   ${tenantId} / api shadow (line 10)\n${file}: 2 to create, 0 to update, 0 unchanged; dry run: nothing was written\n`,
      err: "",
    });
    expect(await rulesOf(t.client, tenantId)).toEqual([]);
    const imported = await run(["import", file, "--url", t.app.url, "--token", t.adminToken]);
    expect(imported.code).toBe(0);
    expect(imported.out).toContain(`${file}: 2 created, 0 updated, 0 unchanged; applied\n`);
    expect(await rulesOf(t.client, tenantId)).toHaveLength(2);
    const exported = await run(["export", "-", "--url", t.app.url, "--token", t.adminToken, "--tenant", tenantId]);
    expect(exported.out).toBe(await exportRules(t.client, tenantId));
  });

  it("import straight into the database reaches the running server at once through Redis", async () => {
    const tenantId = newTenant();
    const file = join(dir, "direct.yaml");
    await writeFile(file, validFile(tenantId));
    const imported = await run(["import", file], databaseEnv());
    expect(imported).toMatchObject({ code: 0, err: "" });
    expect(imported.out).toContain("2 created");
    // Delivered through Redis pub/sub, so it may land a moment after the command returns.
    await expect.poll(async () => (await rulesOf(t.client, tenantId)).map((r) => r.name), { timeout: 1000, interval: 10 }).toEqual(["api shadow", "per-user"]);
    const exportFile = join(dir, "exported.yaml");
    expect((await run(["export", exportFile, "--tenant", tenantId], databaseEnv())).code).toBe(0);
    expect(await readFile(exportFile, "utf8")).toBe(await exportRules(t.client, tenantId));
  });

  it("reports every problem of an invalid file as file:line:column, exits 1 and writes nothing", async () => {
    const tenantId = newTenant();
    const file = join(dir, "invalid.yaml");
    await writeFile(file, fileWithThreeErrors(tenantId));
    const result = await run(["import", file, "--url", t.app.url, "--token", t.adminToken]);
    expect(result.code).toBe(1);
    expect(result.out).toContain(`${file}:10:12: rules[1].limit must be at least 1 (got 0)\n${file}:14:11: rules[2].name must not be empty\n${file}:20:13: `);
    expect(result.out).toContain(`${file}: 1 to create, 0 to update, 0 unchanged; 3 problems: nothing was written\n`);
    expect(await rulesOf(t.client, tenantId)).toEqual([]);
  });

  it("explains its usage and exits 2 when the command line is wrong", async () => {
    const result = await run(["publish", "x.yaml"]);
    expect(result.code).toBe(2);
    expect(result.err).toContain("usage: npm run rules -- <command> FILE [options]");
  });
});
