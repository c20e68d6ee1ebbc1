/**
 * The committed schema.graphql is what clients and codegen read: it must be
 * what the code builds, and it must honour the public contract (a copy of
 * ../shared/contract.graphql in test/fixtures, so the tests need nothing
 * outside the project).
 */

import { readFileSync } from "node:fs";
import { astFromValue, buildSchema, findBreakingChanges, findDangerousChanges, isInputObjectType, print, printSchema, type GraphQLInputField } from "graphql";
import { describe, expect, it } from "vitest";
import { buildApiSchema } from "../../src/api/schema.js";
import { InProcessEventBus } from "../../src/store/memory/in-process-event-bus.js";

const committedSdl = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");
const contract = buildSchema(readFileSync(new URL("../fixtures/contract.graphql", import.meta.url), "utf8"));
const committed = buildSchema(committedSdl);

/** A default value as SDL text ("1", "[]", "SECONDS"), or "none". */
function defaultOf(field: GraphQLInputField | undefined): string {
  if (field?.defaultValue === undefined) return "none";
  const ast = astFromValue(field.defaultValue, field.type);
  return ast ? print(ast) : "null";
}

describe("schema.graphql", () => {
  it("is exactly what the code builds", async () => {
    const built = printSchema(await buildApiSchema(new InProcessEventBus())) + "\n";
    expect(committedSdl, "schema.graphql is stale: run `npm run schema` and commit the result").toBe(built);
  });

  it("makes no breaking change to the contract", () => {
    const changes = findBreakingChanges(contract, committed).map((c) => `${c.type}: ${c.description}`);
    expect(changes).toEqual([]);
  });

  /**
   * Additive input fields the project chose to make, each named: graphql-js
   * calls an added optional input field dangerous, though a caller that
   * leaves it out gets exactly what it got before.
   */
  const CHOSEN_EXTENSIONS = [
    // Issue 13: the CLIENT fingerprint covers the caller's cookie; a check without one keeps its old bucket.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field cookie on input type CheckLimitsInput was added.",
    // Issue 19: a rule's reach, REGIONAL (every rule until then) unless it says GLOBAL.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field reach on input type CreateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field reach on input type UpdateRuleInput was added.",
    // Issue 15: business attributes on a check, and rules keyed by them or applying to some of their values; without them, as before.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field attributeKeys on input type CreateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field when on input type CreateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field attributeKeys on input type UpdateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field when on input type UpdateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field attributes on input type CheckLimitsInput was added.",
    // Issue 16: a FIXED_WINDOW rule counting per calendar period; without a calendar, per window as before.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field calendar on input type CreateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field calendar on input type UpdateRuleInput was added.",
    // Issue 16: CONCURRENCY rules, limiting the requests in flight; a client that does not know it reads only rules it did not make.
    "VALUE_ADDED_TO_ENUM: CONCURRENCY was added to enum type Algorithm.",
    // Issue 16: a rule's automatic ban; without it, refusals ban nobody, as before.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field autoBan on input type CreateRuleInput was added.",
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field autoBan on input type UpdateRuleInput was added.",
    // Issue 13: a check from an app whose router ignores letter case; without it, paths compare case by case as before.
    "OPTIONAL_INPUT_FIELD_ADDED: An optional field ignorePathCase on input type CheckLimitsInput was added.",
  ];

  it("makes no dangerous change to the contract (argument defaults, enum values, optional arguments) beyond the chosen extensions", () => {
    const changes = findDangerousChanges(contract, committed).map((c) => `${c.type}: ${c.description}`);
    expect(changes.filter((change) => !CHOSEN_EXTENSIONS.includes(change))).toEqual([]);
  });

  // graphql-js 16 compares the default values of arguments but not of input
  // fields, and the contract's defaults are all on input fields
  // (CreateRuleInput, CheckLimitsInput): a changed one alters what callers
  // who omit the field get, so each is compared here.
  it("gives every input field of the contract the contract's default value, or none where the contract has none", () => {
    const mismatches: string[] = [];
    for (const type of Object.values(contract.getTypeMap())) {
      if (!isInputObjectType(type) || type.name.startsWith("__")) continue;
      const ours = committed.getType(type.name);
      if (!isInputObjectType(ours)) continue; // a missing or retyped input is findBreakingChanges' to report
      for (const field of Object.values(type.getFields())) {
        const expected = defaultOf(field);
        const actual = defaultOf(ours.getFields()[field.name]);
        if (actual !== expected) mismatches.push(`${type.name}.${field.name}: contract ${expected}, schema.graphql ${actual}`);
      }
    }
    expect(mismatches).toEqual([]);
  });
});
