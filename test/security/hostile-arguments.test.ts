/**
 * Every root field's ID and String arguments, and the ID and String fields of
 * its input objects, get a NUL byte and other control characters, one
 * argument at a time, the others valid (an existing rule or key where an id is
 * needed). Each must be refused with BAD_USER_INPUT naming that argument, not
 * reach Postgres (which cannot hold a NUL and answered with a masked
 * INTERNAL_SERVER_ERROR and a stack in the log). The fields and arguments come
 * from schema.graphql, so a new one is walked without being listed here; a new
 * input type fails the suite until it has a valid example below.
 */

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  buildSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  type GraphQLInputObjectType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLFormattedError,
  type GraphQLInputType,
} from "graphql";
import { createClient, type Client } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CreateApiKeyDocument, CreateRuleDocument } from "../generated/graphql.js";
import { expectNoStackTrace, realStorageAvailable } from "../support/api.js";
import { startTestApp, type Storage } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";

const storage: Storage = (await realStorageAvailable()) ? "real" : "embedded";

/** NUL, other C0 and C1 controls, DEL, a line separator, a bidirectional override, an unpaired surrogate. */
const HOSTILE = ["\u0000", "rule\u0000id", "\u0001", "tab\there", "new\nline", "\u007f", "\u0085", "\u2028", "\u202e", "\ud800"];

/** Arguments whose value is free text rather than a name: they must not fail with a 5xx, and are answered by their own parser. */
const FREE_TEXT = new Set(["importRules.yaml"]);

const schema = buildSchema(readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8"));
const TENANT = `hostile-${randomUUID().slice(0, 8)}`;

/** A valid value for every input type a root field takes. */
const EXAMPLE_INPUTS: Record<string, Record<string, unknown>> = {
  CreateRuleInput: { tenantId: TENANT, name: "walked", limit: 1, window: 1 },
  UpdateRuleInput: { limit: 2 },
  CreateApiKeyInput: { tenantId: TENANT, role: "VIEWER", name: "walked" },
  CheckLimitsInput: { tenantId: TENANT, dryRun: true },
  AttributeInput: { key: "plan", value: "free" },
  AttributeConditionInput: { key: "plan", values: ["free"] },
  RuleCalendarInput: { period: "MONTH", timeZone: "Europe/Berlin" },
  // Its ruleId is the rule the cases name (set once that rule exists), which is keyed by USER.
  SetOverrideInput: { ruleId: "", dimension: "USER", identifier: "u1", limit: 1 },
  AddListEntryInput: { tenantId: TENANT, list: "DENY", kind: "USER", value: "walked", note: "walked" },
  AutoBanInput: { refusals: 5, withinSeconds: 60, banSeconds: 600 },
  BanInput: { tenantId: TENANT, dimension: "USER", value: "u1", durationSeconds: 60 },
};

interface Case {
  field: GraphQLField<unknown, unknown>;
  operation: "query" | "mutation" | "subscription";
  /** Where the hostile value goes, as an error's extensions.field names it: "id", "input.name", "requests[0].tenantId". */
  path: string;
  variables: (hostile: string) => Record<string, unknown>;
}

function isText(type: GraphQLInputType): boolean {
  const named = getNamedType(type);
  return named.name === "ID" || named.name === "String";
}

function isList(type: GraphQLInputType): boolean {
  return isListType(isNonNullType(type) ? type.ofType : type);
}

/**
 * The ID and String fields of an input type, and of the input types it
 * holds, each with where it is ("attributes[0].key") and the example with a
 * hostile value put there; a list holds one element, the hostile one.
 */
function textFields(type: GraphQLInputObjectType): { path: string; withHostile(example: Record<string, unknown>, hostile: string): Record<string, unknown> }[] {
  return Object.values(type.getFields()).flatMap((inner) => {
    const at = (value: unknown) => (isList(inner.type) ? [value] : value);
    const path = `${inner.name}${isList(inner.type) ? "[0]" : ""}`;
    if (isText(inner.type)) return [{ path, withHostile: (example: Record<string, unknown>, hostile: string) => ({ ...example, [inner.name]: at(hostile) }) }];
    const named = getNamedType(inner.type);
    if (!isInputObjectType(named)) return [];
    const nested = EXAMPLE_INPUTS[named.name];
    if (nested === undefined) throw new Error(`no example input for ${named.name}: add one to EXAMPLE_INPUTS`);
    return textFields(named).map((deeper) => ({
      path: `${path}.${deeper.path}`,
      withHostile: (example: Record<string, unknown>, hostile: string) => ({ ...example, [inner.name]: at(deeper.withHostile(nested, hostile)) }),
    }));
  });
}

function cases(ids: { rule: string; key: string }): Case[] {
  const valid = (field: GraphQLField<unknown, unknown>, arg: GraphQLArgument): unknown => {
    const named = getNamedType(arg.type);
    if (isInputObjectType(named)) {
      const example = EXAMPLE_INPUTS[named.name];
      if (example === undefined) throw new Error(`no example input for ${named.name}: add one to EXAMPLE_INPUTS`);
      return isListType(isNonNullType(arg.type) ? arg.type.ofType : arg.type) ? [example] : example;
    }
    if (named.name === "ID") return field.name === "revokeApiKey" ? ids.key : ids.rule;
    if (named.name === "String") return arg.name === "tenantId" ? TENANT : arg.name === "yaml" ? "rules: []" : "user:u1";
    if (named.name === "Int") return 1;
    if (named.name === "Boolean") return true;
    if (named.name === "DateTime") return new Date().toISOString();
    if (isEnumType(named)) return named.getValues()[0]!.name;
    throw new Error(`no example value for ${named.name}: add one`);
  };
  const all: Case[] = [];
  for (const operation of ["query", "mutation", "subscription"] as const) {
    const root = operation === "query" ? schema.getQueryType() : operation === "mutation" ? schema.getMutationType() : schema.getSubscriptionType();
    for (const field of Object.values(root?.getFields() ?? {})) {
      const validArgs = () => Object.fromEntries(field.args.map((arg) => [arg.name, valid(field, arg)]));
      for (const arg of field.args) {
        if (isText(arg.type)) all.push({ field, operation, path: arg.name, variables: (hostile) => ({ ...validArgs(), [arg.name]: hostile }) });
        const named = getNamedType(arg.type);
        if (!isInputObjectType(named)) continue;
        const list = isList(arg.type);
        for (const inner of textFields(named)) {
          all.push({
            field,
            operation,
            path: `${arg.name}${list ? "[0]" : ""}.${inner.path}`,
            variables: (hostile) => {
              const value = inner.withHostile(EXAMPLE_INPUTS[named.name]!, hostile);
              return { ...validArgs(), [arg.name]: list ? [value] : value };
            },
          });
        }
      }
    }
  }
  return all;
}

/** The operation calling `field` with every argument as a variable, selecting only __typename of what it returns. */
function documentOf({ field, operation }: Case): string {
  const variables = field.args.map((arg) => `$${arg.name}: ${String(arg.type)}`).join(", ");
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(", ");
  const selection = isLeafType(getNamedType(field.type)) ? "" : " { __typename }";
  return `${operation}${variables ? `(${variables})` : ""} { ${field.name}${args ? `(${args})` : ""}${selection} }`;
}

describe(`control characters in every ID and String argument (${storage} storage)`, () => {
  let t: TestApp;
  let socket: Client;
  const ids = { rule: "", key: "" };

  beforeAll(async () => {
    t = await startTestApp(storage, { ADMIN_MUTATIONS_PER_MINUTE: "1000000" });
    ids.rule = (await t.client.data(CreateRuleDocument, { input: { tenantId: TENANT, name: "target", scope: ["USER"], limit: 1, window: 1, action: "LOG_ONLY" } })).createRule.id;
    EXAMPLE_INPUTS.SetOverrideInput!.ruleId = ids.rule;
    ids.key = (await t.client.data(CreateApiKeyDocument, { input: { tenantId: TENANT, role: "VIEWER", name: "target" } })).createApiKey.apiKey.id;
    socket = createClient({ url: t.app.url.replace(/^http/, "ws"), webSocketImpl: WebSocket, retryAttempts: 0, connectionParams: { authorization: `Bearer ${t.adminToken}` } });
  });
  afterAll(async () => {
    await socket?.dispose();
    await t?.stop();
  });

  /** The errors of one subscription: those it ends with, or those of its first result; none if it is still listening after a second. */
  function subscribeOnce(query: string, variables: Record<string, unknown>): Promise<readonly GraphQLFormattedError[]> {
    return new Promise((resolve) => {
      const listening = setTimeout(() => {
        stop();
        resolve([]);
      }, 1000);
      const stop = socket.subscribe(
        { query, variables },
        {
          next: (result) => {
            clearTimeout(listening);
            stop();
            resolve(result.errors ?? []);
          },
          error: (error) => {
            clearTimeout(listening);
            resolve(Array.isArray(error) ? (error as GraphQLFormattedError[]) : [{ message: String(error) }]);
          },
          complete: () => {
            clearTimeout(listening);
            resolve([]);
          },
        },
      );
    });
  }

  it("refuses each with BAD_USER_INPUT naming the argument, over HTTP and WebSocket, and nothing reaches the database", { timeout: 120_000 }, async () => {
    const walked = cases(ids);
    expect(walked.map((c) => `${c.field.name}(${c.path})`)).toEqual(
      expect.arrayContaining([
        "ruleHistory(id)",
        "revokeApiKey(id)",
        "apiKeys(tenantId)",
        "throttleEvents(ruleId)",
        "checkLimits(request.attributes[0].value)",
        "createRule(input.when[0].values[0])",
      ]),
    );
    const wrong: string[] = [];
    for (const c of walked) {
      const query = documentOf(c);
      for (const hostile of HOSTILE) {
        const variables = c.variables(hostile);
        let status = 200;
        let errors: readonly GraphQLFormattedError[];
        if (c.operation === "subscription") errors = await subscribeOnce(query, variables);
        else {
          const response = await t.client.raw({ query, variables });
          expectNoStackTrace(response);
          status = response.status;
          errors = response.errors ?? [];
        }
        const [first] = errors;
        const what = `${c.field.name}(${c.path}: ${JSON.stringify(hostile)})`;
        if (status >= 500 || errors.some((e) => e.extensions?.code === "INTERNAL_SERVER_ERROR")) wrong.push(`${what}: HTTP ${status} ${JSON.stringify(errors)}`);
        else if (FREE_TEXT.has(`${c.field.name}.${c.path}`)) continue;
        else if (first?.extensions?.code !== "BAD_USER_INPUT" || first.extensions.field !== c.path) wrong.push(`${what}: ${JSON.stringify(errors)}`);
      }
    }
    expect(wrong).toEqual([]);
    const rule = await t.client.raw<{ rule: { version: number } }>({ query: `{ rule(id: "${ids.rule}") { version } }` });
    expect(rule.data?.rule.version, "the rule every case named was never changed").toBe(1);
  });
});
