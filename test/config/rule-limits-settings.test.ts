/** How many rules a tenant may have and how large an import may be: MAX_RULES_PER_TENANT, MAX_IMPORT_RULES, MAX_IMPORT_BYTES. */

import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../../src/config/settings.js";

describe("rule limit settings", () => {
  it("default to 1,000 rules per tenant, 1,000 rules and 1 MiB per import", () => {
    expect(loadSettings({}).ruleLimits).toEqual({ maxRulesPerTenant: 1000, maxImportRules: 1000, maxImportBytes: 1_048_576 });
  });

  it("take MAX_RULES_PER_TENANT, MAX_IMPORT_RULES and MAX_IMPORT_BYTES", () => {
    expect(loadSettings({ MAX_RULES_PER_TENANT: "50", MAX_IMPORT_RULES: "20", MAX_IMPORT_BYTES: "4096" }).ruleLimits).toEqual({
      maxRulesPerTenant: 50,
      maxImportRules: 20,
      maxImportBytes: 4096,
    });
  });

  it.each([
    ["MAX_RULES_PER_TENANT", "0", 'MAX_RULES_PER_TENANT must be an integer from 1 to 1000000 (got "0")'],
    ["MAX_RULES_PER_TENANT", "lots", 'MAX_RULES_PER_TENANT must be an integer from 1 to 1000000 (got "lots")'],
    ["MAX_IMPORT_RULES", "1.5", 'MAX_IMPORT_RULES must be an integer from 1 to 1000000 (got "1.5")'],
    ["MAX_IMPORT_BYTES", "100", 'MAX_IMPORT_BYTES must be an integer from 1024 to 67108864 (got "100")'],
  ])("stop the start on a bad %s (%s) with a message naming it", (name, value, message) => {
    expect(() => loadSettings({ [name]: value })).toThrow(SettingsError);
    expect(() => loadSettings({ [name]: value })).toThrow(message);
  });
});
