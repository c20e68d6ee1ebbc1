/**
 * How many rules a tenant may have (MAX_RULES_PER_TENANT) and how large an
 * import may be (MAX_IMPORT_RULES, MAX_IMPORT_BYTES), over HTTP on both
 * storages: createRule and importRules alike refuse what would go past them
 * with BAD_USER_INPUT naming the limit, and write nothing. (Exactness under
 * concurrent creators is test/db/rule-repository.test.ts's.)
 */

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SettingsError } from "../../src/config/settings.js";
import { CreateRuleDocument, ImportRulesDocument, ListRulesDocument } from "../generated/graphql.js";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { createRule, expectBadUserInput, newTenant, realStorageAvailable, STORAGES } from "../support/api.js";

const LIMITS = { MAX_RULES_PER_TENANT: "3", MAX_IMPORT_RULES: "5", MAX_IMPORT_BYTES: "2048" };
const realAvailable = await realStorageAvailable();

/** A rules file of one tenant's rules, named r0, r1, …, each `limit` a request per second. */
function rulesFile(tenantId: string, names: readonly string[], limit = 1): string {
  return `rules:\n${names.map((name) => `  - { tenantId: "${tenantId}", name: ${name}, limit: ${limit}, window: 1 }\n`).join("")}`;
}

const names = (count: number) => Array.from({ length: count }, (_, i) => `r${i}`);

for (const storage of STORAGES) {
  describe.runIf(storage === "embedded" || realAvailable)(`rule limits (${storage})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(storage, LIMITS);
    });
    afterAll(() => t?.stop());

    const rulesOf = async (tenantId: string) => (await t.client.data(ListRulesDocument, { tenantId })).rules.filter((r) => r.tenantId === tenantId);
    const importRules = (yaml: string, dryRun = false) => t.client.request(ImportRulesDocument, { yaml, dryRun });

    it("createRule refuses a tenant's rule past MAX_RULES_PER_TENANT, naming it, and creates nothing", async () => {
      const tenantId = newTenant();
      for (const name of names(3)) await createRule(t.client, { tenantId, name, limit: 1, window: 1 });
      const response = await t.client.request(CreateRuleDocument, { input: { tenantId, name: "one too many", limit: 1, window: 1 } });
      expectBadUserInput(response.errors, "input.tenantId");
      expect(response.errors![0]!.message).toBe(
        `input.tenantId would take tenant "${tenantId}" to 4 rules, more than the 3 a tenant may have (MAX_RULES_PER_TENANT)`,
      );
      expect((await rulesOf(tenantId)).map((r) => r.name)).toEqual(names(3));
      expect((await createRule(t.client, { tenantId: newTenant(), name: "elsewhere", limit: 1, window: 1 })).name).toBe("elsewhere");
    });

    it('counts the rules of tenant "*" against a quota of their own', async () => {
      const global = `global-${newTenant()}`;
      const responses = [];
      for (let i = 0; i < 4; i++) responses.push(await t.client.request(CreateRuleDocument, { input: { tenantId: "*", name: `${global}-${i}`, limit: 1, window: 1 } }));
      expect(responses.slice(0, 3).map((r) => r.errors)).toEqual([undefined, undefined, undefined]);
      expectBadUserInput(responses[3]!.errors, "input.tenantId");
      expect(responses[3]!.errors![0]!.message).toBe('input.tenantId would take tenant "*" to 4 rules, more than the 3 a tenant may have (MAX_RULES_PER_TENANT)');
      expect((await rulesOf("*")).length).toBe(3);
      const tenantId = newTenant();
      for (const name of names(3)) await createRule(t.client, { tenantId, name, limit: 1, window: 1 });
    });

    it("importRules refuses a file that would take a tenant past the quota, in a dry run too, counting what it would have after it", async () => {
      const tenantId = newTenant();
      await createRule(t.client, { tenantId, name: "r0", limit: 1, window: 1 });
      for (const dryRun of [true, false]) {
        const response = await importRules(rulesFile(tenantId, names(4)), dryRun);
        expectBadUserInput(response.errors, "yaml");
        expect(response.errors![0]!.message).toBe(
          `yaml would take tenant "${tenantId}" to 4 rules, more than the 3 a tenant may have (MAX_RULES_PER_TENANT)`,
        );
      }
      expect((await rulesOf(tenantId)).map((r) => r.name)).toEqual(["r0"]);
      // Up to the quota, and then updates of every rule, which add none.
      expect((await importRules(rulesFile(tenantId, names(3)))).data?.importRules).toMatchObject({ applied: true, created: [{ name: "r1" }, { name: "r2" }] });
      expect((await importRules(rulesFile(tenantId, names(3), 2))).data?.importRules.updated).toHaveLength(3);
    });

    it("importRules refuses more entries than MAX_IMPORT_RULES before anything else, naming it", async () => {
      const tenantId = newTenant();
      const response = await importRules(rulesFile(tenantId, names(6)), true);
      expectBadUserInput(response.errors, "yaml");
      expect(response.errors![0]!.message).toBe("yaml holds 6 rules, more than the 5 an import may have (MAX_IMPORT_RULES); split the file");
      expect(await rulesOf(tenantId)).toEqual([]);
    });

    it("importRules refuses a file larger than MAX_IMPORT_BYTES without reading it, naming it", async () => {
      const tenantId = newTenant();
      const yaml = `# ${"padding ".repeat(300)}\n${rulesFile(tenantId, names(1))}`;
      const response = await importRules(yaml);
      expectBadUserInput(response.errors, "yaml");
      expect(response.errors![0]!.message).toBe(`yaml is ${Buffer.byteLength(yaml)} bytes, more than the 2048 an import may have (MAX_IMPORT_BYTES); split the file`);
      expect(await rulesOf(tenantId)).toEqual([]);
    });
  });
}

describe("a RULES_FILE past the limits", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "floodgate-limits-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("stops the start in one line naming the limit, and applies none of it", async () => {
    const file = join(dir, "too-many.yaml");
    await writeFile(file, rulesFile(newTenant(), names(4)));
    const start = startTestApp(realAvailable ? "real" : "embedded", { ...LIMITS, RULES_FILE: file });
    await expect(start).rejects.toBeInstanceOf(SettingsError);
    await expect(start).rejects.toThrow(/^RULES_FILE .* cannot be imported, so none of it was applied: yaml would take tenant "t-.*" to 4 rules, more than the 3 a tenant may have \(MAX_RULES_PER_TENANT\)$/);
  });
});
