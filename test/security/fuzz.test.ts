/**
 * Thousands of malformed or hostile requests over HTTP, with the admin token:
 * random GraphQL documents from a small grammar of the schema's real names,
 * token soup, unbalanced braces, huge strings, deep nesting, many aliases,
 * wrong argument and variable types, unknown operations, oversized batches,
 * invalid JSON, other content types, huge numbers, unicode and control
 * characters, introspection. Every answer must be a proper GraphQL response
 * (data, or errors each carrying extensions.code), never a 5xx, never a stack
 * trace or a file path; afterwards the service is up, no rule changed and no
 * counter moved.
 *
 * Some requests are built to cost the server far more than they cost to
 * send, and must each get the answer their generator expects: fragment
 * fan-outs (up to 12 levels of fragments each spreading the next up to ten
 * times: 2 × 10^11 fields), refused past MAX_QUERY_FIELDS; aliases that
 * multiply checks past 1,000 per operation, refused with BAD_USER_INPUT
 * naming the cap; and many distinct large check documents without a valid
 * token, answered 401 with nothing compiled for any of them. One such
 * request blocking the process would stall every other one and the suite's
 * deadline.
 *
 * FUZZ_REQUESTS sets how many (default 2000), FUZZ_SEED replays a run (the
 * seed is printed with the breakdown), FUZZ_CONCURRENCY how many are in
 * flight at once (16), and FUZZ_DEBUG=1 also prints the slowest requests.
 * The service runs in this process, so one request's cost shows in all.
 */

import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { getIntrospectionQuery, print } from "graphql";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CompiledChecks } from "../../src/api/fast-path/compiled-checks.js";
import { loadSettings } from "../../src/config/settings.js";
import {
  ApiKeysDocument,
  CheckLimitsBatchDocument,
  CheckLimitsDocument,
  CreateApiKeyDocument,
  CreateRuleDocument,
  DeleteRuleDocument,
  ExportRulesDocument,
  GetRuleDocument,
  ImportRulesDocument,
  ListRulesDocument,
  PromoteRuleDocument,
  ResetLimitDocument,
  RevokeApiKeyDocument,
  RollbackRuleDocument,
  RuleHistoryDocument,
  UpdateRuleDocument,
} from "../generated/graphql.js";
import { realStorageAvailable } from "../support/api.js";
import { startTestApp, type Storage } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { fragmentFanOut } from "../support/hostile-documents.js";

/** Every document the checks' fast path tries to compile, by its text. */
const compilations = vi.spyOn(CompiledChecks.prototype as unknown as { compile: (query: string) => unknown }, "compile");

const storage: Storage = (await realStorageAvailable()) ? "real" : "embedded";
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2000);
const SEED = process.env.FUZZ_SEED === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED);
const CONCURRENCY = Number(process.env.FUZZ_CONCURRENCY ?? 16);

// ---------------------------------------------------------------------------
// What is sent
// ---------------------------------------------------------------------------

interface FuzzRequest {
  /** Which generator made it, for the failure report. */
  kind: string;
  method: "GET" | "POST";
  /** Appended to /graphql: a query string, with its "?". */
  search?: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** What the answer must be, for generators that know: its first error's code, or "data". */
  expected?: string;
}

const JSON_TYPE = { "content-type": "application/json" };

/** Tenants the fuzz may name. The sentinel's tenant is never among them, nor can a random string be it. */
const TENANTS = ["fz-a", "fz-b", "*", "", " ", "fz-\u00fc", "fz-\u202e-rtl", "fz-\u0000", "a".repeat(129), "fz-a|user:x", "fz-%7C"];
const QUERY_FIELDS = ["rule", "rules", "checkLimits", "checkLimitsBatch", "apiKeys", "ruleHistory", "exportRules"];
const MUTATION_FIELDS = ["createRule", "updateRule", "deleteRule", "resetLimit", "createApiKey", "revokeApiKey", "rollbackRule", "promoteRule", "importRules"];
const SUBSCRIPTION_FIELDS = ["throttleEvents", "ruleChanges", "nearLimitEvents"];
const OUTPUT_FIELDS = [
  ...["id", "tenantId", "name", "scope", "resource", "method", "algorithm", "limit", "window", "windowUnit", "windowSeconds", "burst"],
  ...["action", "failureMode", "priority", "enabled", "version", "createdAt", "updatedAt", "allowed", "degraded", "decidedAt", "rule"],
  ...["remaining", "resetAt", "retryAfter", "delayMs", "results", "key", "headers", "value", "secret", "apiKey", "role", "revokedAt"],
  ...["kind", "ruleId", "ruleName", "shadow", "count", "at", "actor", "note", "before", "after", "applied", "created", "updated", "unchanged"],
  ...["invalid", "line", "column", "field", "message", "dryRun", "source", "nearLimit", "consulted"],
];
const JUNK_NAMES = ["nope", "constructor", "__proto__", "toString", "_", "a1", "Query", "Rule", "__Schema", "\u00e9t\u00e9"];
const ARG_NAMES = ["id", "tenantId", "request", "requests", "input", "key", "ruleId", "expectedVersion", "version", "action", "yaml", "dryRun", "x", "__proto__"];
/** Input fields. `window` and `role` are left out here: they only ever get invalid values (see INVALID_REQUIRED), so no mutation can succeed. */
const INPUT_KEYS = [
  ...["tenantId", "userId", "ip", "apiKey", "userAgent", "resource", "method", "cost", "dryRun", "name", "scope", "algorithm"],
  ...["limit", "windowUnit", "burst", "action", "failureMode", "priority", "enabled", "bogus", "__proto__", "constructor"],
];
const ENUMS = ["USER", "IP", "TENANT", "ENDPOINT", "REJECT", "THROTTLE", "LOG_ONLY", "SECONDS", "DAYS", "SLIDING_WINDOW_LOG", "OPEN", "CLOSED", "ADMIN", "VIEWER", "NOPE", "true", "null"];
const TYPE_NAMES = ["Query", "Mutation", "Subscription", "Rule", "LimitDecision", "ApiKey", "RuleResult", "__Schema", "__Type", "Nope", "String"];
const VARIABLE_TYPES = ["CheckLimitsInput!", "[CheckLimitsInput!]!", "Int", "String!", "ID", "CreateRuleInput", "Boolean", "[[Int]]", "Nope", "UpdateRuleInput!"];
const NUMBERS = ["0", "-0", "1", "2147483647", "2147483648", "-2147483649", "9007199254740993", "99999999999999999999999", "1e400", "-1e400", "1.5", "1e3", "0x10", "01", ".5", "1_000", "NaN", "Infinity"];

/** Values that can never make `window` (Int!, 1 s to 366 days) or `role` (Role!) valid. */
const INVALID_REQUIRED = {
  window: ["0", "-1", "2147483648", "1.5", '"60"', "null", "[1]", "{ n: 1 }", "99999999999999"],
  role: ['"ADMIN"', "SUPERUSER", "admin", "0", "null", "[ADMIN]", "ROOT"],
};

const pick = <T>(values: readonly T[]) => fc.constantFrom(...values);

/**
 * Hostile rules files for importRules: alias bombs, merge keys, tags, deep
 * nesting, duplicate keys, several documents, thousands of entries. None holds
 * a valid rule (every `window` is invalid, or there is no rule at all), so no
 * import can change anything.
 */
const LAUGHS = ["a", "b", "c", "d", "e", "f"].map((name, i, names) => `${name}: &${name} [${Array.from({ length: 9 }, () => (i === 0 ? '"lol"' : `*${names[i - 1]}`)).join(", ")}]`);
const YAML_FILES = [
  [...LAUGHS, "rules: *f"].join("\n"),
  "rules:\n  - &r { tenantId: fz-a, name: x, limit: 1, window: 0 }\n  - *r\n  - { <<: *r, name: y }\n",
  'rules: !!js/function "function () { return 1 }"',
  "rules:\n  - !!binary aGVsbG8=\n",
  `rules: ${"[".repeat(5_000)}`,
  "rules:\n  - tenantId: fz-a\n    tenantId: fz-b\n    name: dup\n    limit: 1\n    window: 0\n",
  "%YAML 9.9\n---\nrules: []\n---\nrules: [{ tenantId: fz-a, name: x, limit: 1, window: -1 }]\n",
  "rules: []\n",
  "rules: null",
  "rules: {}",
  '- tenantId: "*"\n  name: x\n  limit: 1\n  window: 0\n',
  `rules:\n${Array.from({ length: 2_000 }, (_, i) => `  - { tenantId: fz-a, name: n${i}, limit: 1, window: 0 }`).join("\n")}\n`,
  'rules:\n  - tenantId: fz-a\n    name: "\\u0000"\n    limit: 99999999999999999999\n    window: 1e400\n',
  "\ufeffrules:\n\t- tenantId: fz-a",
];

/** encodeURIComponent, which throws on a lone surrogate (generated strings may hold one): those become U+FFFD first. */
const encodeUri = (text: string) => encodeURIComponent(text.toWellFormed());

/** A string of up to `max` characters, made fast by repeating a short random seed. */
function long(unit: "grapheme-ascii" | "binary", min: number, max: number): fc.Arbitrary<string> {
  return fc.tuple(fc.string({ unit, minLength: 1, maxLength: 16 }), fc.integer({ min, max })).map(([seed, length]) => seed.repeat(Math.ceil(length / seed.length)).slice(0, length));
}

/** A random string as GraphQL source: escaped as JSON does (lone surrogates as \udxxx), raw (control characters and all), or a block string. */
const graphqlString: fc.Arbitrary<string> = fc.oneof(
  { weight: 12, arbitrary: pick(TENANTS).map((s) => JSON.stringify(s)) },
  { weight: 12, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map((s) => JSON.stringify(s)) },
  { weight: 6, arbitrary: fc.string({ unit: "binary-ascii", maxLength: 40 }).map((s) => `"${s}"`) },
  { weight: 3, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }).map((s) => `"""${s}"""`) },
  { weight: 3, arbitrary: pick(['"\\ud800"', '"\\udc00x"', '"\\u{1F600}"', '"\\x41"', '"\\u00"', '"unterminated', '"a\nb"']) },
  { weight: 1, arbitrary: long("binary", 1_000, 100_000).map((s) => JSON.stringify(s)) },
  { weight: 2, arbitrary: pick(YAML_FILES).map((s) => JSON.stringify(s)) },
);

const graphqlNumber: fc.Arbitrary<string> = fc.oneof(pick(NUMBERS), fc.integer().map(String), fc.double({ noNaN: true }).map(String), fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String));

/** A GraphQL value literal, of any type, nested. */
const { value: graphqlValue } = fc.letrec<{ value: string; object: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    graphqlNumber,
    graphqlString,
    pick([...ENUMS, "true", "false", "null", "$v", "$r", "$undefined"]),
    fc.array(tie("value"), { maxLength: 4 }).map((items) => `[${items.join(", ")}]`),
    tie("object"),
  ),
  object: fc
    .tuple(
      fc.array(fc.tuple(pick(INPUT_KEYS), tie("value")), { maxLength: 6 }),
      fc.option(fc.tuple(pick(["window", "role"] as const), fc.nat())),
    )
    .map(([pairs, required]) => {
      const fields = pairs.map(([key, value]) => `${key}: ${value}`);
      if (required) fields.push(`${required[0]}: ${INVALID_REQUIRED[required[0]][required[1] % INVALID_REQUIRED[required[0]].length]}`);
      return `{ ${fields.join(", ")} }`;
    }),
}));

const fieldName = fc.oneof({ weight: 3, arbitrary: pick([...QUERY_FIELDS, ...MUTATION_FIELDS, ...SUBSCRIPTION_FIELDS]) }, { weight: 5, arbitrary: pick(OUTPUT_FIELDS) }, pick(JUNK_NAMES));
const argumentList = fc.array(fc.tuple(pick(ARG_NAMES), graphqlValue), { maxLength: 3 }).map((args) => (args.length === 0 ? "" : `(${args.map(([name, value]) => `${name}: ${value}`).join(", ")})`));

/** Selections: fields with aliases, arguments and sub-selections, __typename, inline fragments and spreads. */
const { selections } = fc.letrec<{ selections: string; selection: string }>((tie) => ({
  selections: fc.array(tie("selection"), { minLength: 1, maxLength: 5 }).map((items) => items.join(" ")),
  selection: fc.oneof(
    { depthSize: "small" },
    fc
      .tuple(fc.option(pick(["a", "b", "x1", "__typename", "rule"])), fieldName, argumentList)
      .map(([alias, name, args]) => `${alias ? `${alias}: ` : ""}${name}${args}`),
    fc.tuple(fieldName, argumentList, tie("selections")).map(([name, args, inner]) => `${name}${args} { ${inner} }`),
    fc.constant("__typename"),
    fc.tuple(pick(TYPE_NAMES), tie("selections")).map(([type, inner]) => `... on ${type} { ${inner} }`),
    pick(["...F", "...G", "...Missing", "... @skip(if: true) { __typename }", "rule @include(if: $v) { id }"]),
  ),
}));

const variableDefinitions = fc
  .array(fc.tuple(pick(["$v", "$r", "$n", "$dup", "$dup"]), pick(VARIABLE_TYPES), fc.option(graphqlValue)), { maxLength: 3 })
  .map((defs) => (defs.length === 0 ? "" : `(${defs.map(([name, type, dflt]) => `${name}: ${type}${dflt ? ` = ${dflt}` : ""}`).join(", ")})`));

/** A whole document: operations of any type (or none), names, variables, fragment definitions. */
const grammarDocument: fc.Arbitrary<string> = fc
  .tuple(
    fc.array(
      fc.tuple(pick(["", "query", "mutation", "subscription", "query Q", "mutation M", "subscription S", "Query", "query Q"]), variableDefinitions, selections),
      { minLength: 1, maxLength: 2 },
    ),
    fc.array(fc.tuple(pick(["F", "G", "F"]), pick(TYPE_NAMES), selections), { maxLength: 2 }),
  )
  .map(([operations, fragments]) =>
    [
      ...operations.map(([head, vars, body]) => `${head}${head === "" && vars !== "" ? "query" : ""}${vars} { ${body} }`),
      ...fragments.map(([name, type, body]) => `fragment ${name} on ${type} { ${body} }`),
    ].join("\n"),
  );

const TOKENS = [
  ...["{", "}", "(", ")", "[", "]", ":", "$", "!", "=", "@", "...", "|", "&", ",", "#", '"', '"""', "\\", "\n", "\u0000", "\ufeff"],
  ...["query", "mutation", "subscription", "fragment", "on", "true", "null", "__typename", "__schema", "__type", "directive", "schema", "extend", "type"],
  ...[...QUERY_FIELDS, ...MUTATION_FIELDS, ...OUTPUT_FIELDS.slice(0, 10), ...NUMBERS.slice(0, 8), '"fz-a"', "$v", "Int!"],
];
const tokenSoup = fc.array(pick(TOKENS), { minLength: 1, maxLength: 80 }).map((tokens) => tokens.join(" "));

/** Nesting far past MAX_QUERY_DEPTH: selections, lists, objects, or braces that never close. */
const deepDocument = fc.tuple(fc.integer({ min: 10, max: 30_000 }), fc.nat(5)).map(([depth, shape]) => {
  switch (shape) {
    case 0:
      return `{ ${"rules { rule { ".repeat(depth)}id${" }".repeat(depth * 2)} }`;
    case 1:
      return `{ rule(id: ${"[".repeat(depth)}1${"]".repeat(depth)}) { id } }`;
    case 2:
      return `{ checkLimits(request: ${"{ tenantId: ".repeat(depth)}"fz-a"${" }".repeat(depth)}) { allowed } }`;
    case 3:
      return "{".repeat(depth);
    case 4:
      return `query { ${"... on Query { ".repeat(depth)}__typename${" }".repeat(depth)} }`;
    default:
      return `{ ${"a: __typename ".repeat(10)}${"}".repeat(depth)}`;
  }
});

/**
 * Many aliases, under and over MAX_QUERY_FIELDS (5000 by default): up to 7,000
 * __typename, or aliased checks (two fields each) either run (up to 500) or
 * just past the limit. An aliased check costs the server about a tenth of a
 * millisecond to parse and validate and more to run, so the suite's time
 * budget keeps them to what crosses the limit.
 */
const aliasedDocument = fc
  .oneof(
    fc.tuple(fc.integer({ min: 100, max: 7_000 }), fc.constant(false)),
    fc.tuple(fc.oneof(fc.integer({ min: 100, max: 500 }), fc.integer({ min: 2_501, max: 2_600 })), fc.constant(true)),
  )
  .map(([count, checks]) =>
  checks
    ? `{ ${Array.from({ length: count }, (_, i) => `c${i}: checkLimits(request: { tenantId: "fz-a", userId: "u${i}", dryRun: true }) { allowed }`).join(" ")} }`
    : `{ ${Array.from({ length: count }, (_, i) => `a${i}: __typename`).join(" ")} }`,
);

const introspectionDocument = pick([
  getIntrospectionQuery(),
  getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true }),
  "{ __schema { types { name fields { name args { name type { name kind ofType { name kind ofType { name } } } } } } } }",
  '{ __type(name: "Rule") { name fields { name type { name } } } }',
  '{ __type(name: "Nope") { name } }',
  "query { ...S } fragment S on Query { __schema { queryType { name } mutationType { name } subscriptionType { name } } }",
  "{ __typename rules { __typename id } }",
  "{ __schema { directives { name args { name } } } }",
  "mutation { __typename }",
  "subscription { __typename }",
]);

/** The real operations (as the tests send them) with variables of every wrong shape. */
const REAL_DOCUMENTS = [
  CheckLimitsDocument,
  CheckLimitsBatchDocument,
  CreateRuleDocument,
  UpdateRuleDocument,
  DeleteRuleDocument,
  ResetLimitDocument,
  GetRuleDocument,
  ListRulesDocument,
  ApiKeysDocument,
  CreateApiKeyDocument,
  RevokeApiKeyDocument,
  RuleHistoryDocument,
  RollbackRuleDocument,
  PromoteRuleDocument,
  ImportRulesDocument,
  ExportRulesDocument,
].map((document) => print(document));

const jsonNumber = pick([0, -0, 1.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e300, -1e300, Number.MAX_VALUE, Number.MIN_VALUE, 1_000_001, -1]);
const jsonLeaf = fc.oneof(
  { weight: 10, arbitrary: jsonNumber },
  { weight: 10, arbitrary: fc.integer() },
  { weight: 10, arbitrary: pick(TENANTS) },
  { weight: 10, arbitrary: fc.string({ unit: "binary", maxLength: 30 }) },
  { weight: 5, arbitrary: fc.boolean() },
  { weight: 5, arbitrary: fc.constant(null) },
  { weight: 5, arbitrary: pick(ENUMS) },
  { weight: 1, arbitrary: long("grapheme-ascii", 1_000, 100_000) },
);
/** An input object from the real field names with leaves of any type; `window` and `role`, when present, invalid. */
const jsonInput = fc
  .tuple(fc.dictionary(pick([...INPUT_KEYS, "id"]), fc.oneof(jsonLeaf, fc.array(jsonLeaf, { maxLength: 3 }))), fc.option(pick([0, -1, "60", null, 2 ** 31, 1.5])), fc.option(pick(["ROOT", "admin", 0, null, ["ADMIN"]])))
  .map(([input, window, role]) => ({ ...input, ...(window === null ? {} : { window }), ...(role === null ? {} : { role }) }));
const jsonVariables = fc.oneof(
  fc.record({ request: fc.oneof(jsonInput, jsonLeaf) }, { requiredKeys: [] }),
  fc.record({ requests: fc.oneof(fc.array(jsonInput, { maxLength: 5 }), jsonInput, jsonLeaf) }, { requiredKeys: [] }),
  fc.record({ input: fc.oneof(jsonInput, jsonLeaf), id: fc.oneof(fc.uuid(), jsonLeaf), expectedVersion: fc.oneof(jsonNumber, jsonLeaf) }, { requiredKeys: [] }),
  fc.record({ ruleId: fc.oneof(fc.uuid(), jsonLeaf), key: jsonLeaf, tenantId: jsonLeaf }, { requiredKeys: [] }),
  fc.record({ yaml: fc.oneof(pick(YAML_FILES), jsonLeaf), dryRun: jsonLeaf }, { requiredKeys: [] }),
  fc.record(
    { id: fc.oneof(fc.uuid(), jsonLeaf), version: fc.oneof(jsonNumber, jsonLeaf), action: fc.oneof(pick(["REJECT", "THROTTLE", "LOG_ONLY", "NOPE"]), jsonLeaf) },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 4 }),
);

const realDocumentWithVariables = fc
  .tuple(pick(REAL_DOCUMENTS), jsonVariables, fc.option(pick(["CheckLimits", "Nope", "", 5, null, ["x"]]), { freq: 4 }))
  .map(([query, variables, operationName]) => ({ query, variables, ...(operationName === null ? {} : { operationName }) }));

/** checkLimitsBatch past its 1,000 checks, as variables or as one literal document. */
const oversizedBatch = fc.tuple(fc.integer({ min: 1_001, max: 1_500 }), fc.boolean(), pick(TENANTS)).map(([count, literal, tenantId]) =>
  literal
    ? { query: `{ checkLimitsBatch(requests: [${`{ tenantId: ${JSON.stringify(tenantId)}, userId: "u" }, `.repeat(count)}]) { allowed } }` }
    : { query: print(CheckLimitsBatchDocument), variables: { requests: Array.from({ length: count }, (_, i) => ({ tenantId, userId: `u${i}`, cost: (i % 7) + 1 })) } },
);

/** Documents whose operation is not there to be run: missing, ambiguous, misnamed. */
const unknownOperation = fc.oneof(
  fc.tuple(grammarDocument, fc.oneof(fc.string({ maxLength: 10 }), fc.constant("Q"))).map(([query, operationName]) => ({ query, operationName })),
  pick([
    { query: "query A { __typename } query B { __typename }" },
    { query: "query A { __typename } query A { __typename }", operationName: "A" },
    { query: "fragment F on Query { __typename }" },
    { query: "schema { query: Query }" },
    { query: "type Query { x: Int }" },
    { query: "{ __typename }", operationName: "Missing" },
    { query: "query ($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed } }" },
    { query: "directive @x on FIELD" },
    { query: "" },
    { query: "   \n\t  " },
    { query: "# only a comment" },
  ]),
);

const GRAPHQL_BODY = fc.oneof(
  { weight: 30, arbitrary: fc.tuple(grammarDocument, fc.option(jsonVariables, { freq: 3 })).map(([query, variables]) => ({ kind: "grammar", body: variables === null ? { query } : { query, variables } })) },
  { weight: 10, arbitrary: tokenSoup.map((query) => ({ kind: "token soup", body: { query } })) },
  { weight: 5, arbitrary: deepDocument.map((query) => ({ kind: "deep nesting", body: { query } })) },
  { weight: 2, arbitrary: aliasedDocument.map((query) => ({ kind: "many aliases", body: { query } })) },
  { weight: 4, arbitrary: long("binary", 10_000, 100_000).map((query) => ({ kind: "huge random document", body: { query } })) },
  { weight: 12, arbitrary: realDocumentWithVariables.map((body) => ({ kind: "wrong variables", body })) },
  { weight: 2, arbitrary: oversizedBatch.map((body) => ({ kind: "oversized batch", body })) },
  { weight: 5, arbitrary: unknownOperation.map((body) => ({ kind: "unknown operation", body })) },
  { weight: 4, arbitrary: introspectionDocument.map((query) => ({ kind: "introspection", body: { query } })) },
);

const jsonRequest: fc.Arbitrary<FuzzRequest> = GRAPHQL_BODY.map(({ kind, body }) => ({ kind, method: "POST", headers: JSON_TYPE, body: JSON.stringify(body) }));

/** Bodies that are not JSON, or JSON of the wrong shape. */
const badJsonRequest: fc.Arbitrary<FuzzRequest> = fc
  .oneof(
    fc.tuple(GRAPHQL_BODY, fc.nat()).map(([{ body }, cut]) => {
      const text = JSON.stringify(body);
      return text.slice(0, cut % Math.max(1, text.length));
    }),
    fc.string({ unit: "binary", maxLength: 200 }),
    pick([
      "",
      "{",
      "}",
      "null",
      "true",
      "42",
      '"query"',
      "[]",
      '[{"query":"{ __typename }"},{"query":"{ __typename }"}]',
      '{"query": 42}',
      '{"query": null}',
      '{"query": ["{ __typename }"]}',
      '{"query": {"kind": "Document"}}',
      '{"variables": "x"}',
      '{"query": "{ __typename }", "variables": "{}"}',
      '{"query": "{ __typename }", "variables": [1]}',
      '{"query": "{ __typename }", "extensions": {"persistedQuery": {"version": 1, "sha256Hash": "00"}}}',
      '{"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ecf4edb46db40b5132295c0291d62fb65d6759a9eedfa4d5d612dd5ec54a6b38"}}}',
      '{"extensions": {"persistedQuery": {"version": 2}}}',
      '{"query": "{ __typename }", "operationName": {"a": 1}}',
      '{"query": NaN}',
      '{"query": "{ __typename }",}',
      "\ufeff{\"query\": \"{ __typename }\"}",
      '{"__proto__": {"query": "{ __typename }"}}',
      '{"query": "{ __typename }", "query": "mutation { deleteRule(id: \\"x\\") }"}',
    ]),
    fc.integer({ min: 1_000, max: 100_000 }).map((depth) => "[".repeat(depth)),
    fc.integer({ min: 1_000, max: 50_000 }).map((depth) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`),
  )
  .map((body) => ({ kind: "invalid JSON", method: "POST", headers: JSON_TYPE, body }));

/** A JSON body that is a real GraphQL request, under another content type (or none). */
const otherContentType: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    GRAPHQL_BODY,
    pick([
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/graphql",
      "application/xml",
      "application/json; charset=utf-16",
      "application/graphql-response+json",
      "application/jsonx",
      "text/json",
      "*/*",
      "application/json, text/plain",
      "",
      "\u00e9",
    ]),
    fc.boolean(),
  )
  .map(([{ body }, contentType, preflight]) => ({
    kind: "other content type",
    method: "POST",
    headers: { ...(contentType === "" ? {} : { "content-type": contentType }), ...(preflight ? { "apollo-require-preflight": "true" } : {}) },
    body: contentType.startsWith("application/x-www") ? `query=${encodeUri(String((body as { query?: unknown }).query ?? ""))}` : JSON.stringify(body),
  }));

/** Bytes that are not UTF-8 at all. */
const binaryBody: fc.Arbitrary<FuzzRequest> = fc.uint8Array({ minLength: 1, maxLength: 2_000 }).map((body) => ({ kind: "binary body", method: "POST", headers: JSON_TYPE, body }));

/** GET /graphql?query=..., with and without CSRF preflight, including mutations and broken variables. */
const getRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(fc.oneof(grammarDocument, introspectionDocument, tokenSoup), fc.option(fc.oneof(jsonVariables.map((v) => JSON.stringify(v)), pick(["{bad", "[]", "null"]))), fc.boolean())
  .map(([query, variables, preflight]): FuzzRequest => ({
    kind: "GET",
    method: "GET",
    search: `?query=${encodeUri(query)}${variables === null ? "" : `&variables=${encodeUri(variables)}`}`,
    headers: preflight ? { "apollo-require-preflight": "true" } : {},
  }));

/** A body past MAX_BODY_BYTES (1 MiB). */
const oversizedBody: fc.Arbitrary<FuzzRequest> = fc.integer({ min: (1 << 20) + 1, max: (1 << 20) + 200_000 }).map((size) => ({
  kind: "oversized body",
  method: "POST",
  headers: JSON_TYPE,
  body: JSON.stringify({ query: "{ __typename }", variables: { padding: "x".repeat(size) } }),
}));

const MAX_QUERY_FIELDS = loadSettings({}).maxQueryFields;

/** Fragments spreading fragments: 2 × spreads^(levels - 1) fields once expanded, in about 85 bytes a level. */
const fanOut: fc.Arbitrary<FuzzRequest> = fc.tuple(fc.integer({ min: 2, max: 12 }), fc.integer({ min: 2, max: 10 })).map(([levels, spreads]) => ({
  kind: "fragment fan-out",
  method: "POST",
  headers: JSON_TYPE,
  body: JSON.stringify({ query: fragmentFanOut(levels, spreads) }),
  // Every spread selects the same field: it runs once.
  expected: 2 * spreads ** (levels - 1) > MAX_QUERY_FIELDS ? "GRAPHQL_VALIDATION_FAILED" : "data",
}));

/** Past 1,000 checks in one operation within MAX_QUERY_FIELDS: aliased checkLimits, or aliased batches sharing one variable. */
const aliasMultiplication: fc.Arbitrary<FuzzRequest> = fc
  .oneof(
    fc.integer({ min: 1_001, max: 1_200 }).map((count) => ({
      query: `{ ${Array.from({ length: count }, (_, i) => `c${i}: checkLimits(request: { tenantId: "fz-a", userId: "u${i}", dryRun: true }) { allowed }`).join(" ")} }`,
    })),
    fc
      .integer({ min: 2, max: 40 })
      .chain((aliases) => fc.tuple(fc.constant(aliases), fc.integer({ min: Math.floor(1_000 / aliases) + 1, max: 1_000 })))
      .map(([aliases, size]) => ({
        query: `query Many($r: [CheckLimitsInput!]!) { ${Array.from({ length: aliases }, (_, i) => `b${i}: checkLimitsBatch(requests: $r) { allowed }`).join(" ")} }`,
        variables: { r: Array.from({ length: size }, (_, i) => ({ tenantId: "fz-a", userId: `u${i}`, dryRun: true })) },
      })),
  )
  .map((body) => ({ kind: "alias multiplication", method: "POST", headers: JSON_TYPE, body: JSON.stringify(body), expected: "BAD_USER_INPUT" }));

/** Distinct check documents of up to 100 KB, without a token or with a wrong one. */
const withoutToken: fc.Arbitrary<FuzzRequest> = fc
  .tuple(fc.integer({ min: 1, max: 2_400 }), fc.uuid(), pick(["", "Bearer fg_not-a-key", "Basic YWRtaW46YWRtaW4=", "Bearer"]))
  .map(([count, tag, authorization]) => ({
    kind: "no valid token",
    method: "POST",
    headers: { ...JSON_TYPE, authorization },
    body: JSON.stringify({ query: `{ ${Array.from({ length: count }, (_, i) => `c${i}: checkLimits(request: { tenantId: "${tag}" }) { allowed }`).join(" ")} }` }),
    expected: "UNAUTHENTICATED",
  }));

const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc
  .tuple(
    fc.oneof(
      { weight: 70, arbitrary: jsonRequest },
      { weight: 2, arbitrary: fanOut },
      { weight: 1, arbitrary: aliasMultiplication },
      { weight: 2, arbitrary: withoutToken },
      { weight: 10, arbitrary: badJsonRequest },
      { weight: 8, arbitrary: otherContentType },
      { weight: 2, arbitrary: binaryBody },
      { weight: 8, arbitrary: getRequest },
      { weight: 1, arbitrary: oversizedBody },
    ),
    fc.option(fc.string({ unit: "grapheme-ascii", maxLength: 200 })),
  )
  .map(([request, requestId]) => (requestId === null ? request : { ...request, headers: { ...request.headers, "x-request-id": requestId } }));

// ---------------------------------------------------------------------------
// What must come back
// ---------------------------------------------------------------------------

interface Answer {
  status: number;
  text: string;
}

/** V8 frames ("at fn (/x.js:1:2)", "    at "), stacktrace extensions, or a path to a source file of the server. */
const LEAKS: [string, RegExp][] = [
  ["a stacktrace", /stacktrace/i],
  ["a stack frame", /\bat (?:[^\s"()]+ )?\(?(?:file:\/\/|node:|\/)[^\s"()]*:\d+:\d+\)?/],
  ['an indented "at" frame', /(?: {4}|\\n\s*)at \S/],
  ["a file path", /(?:file:\/\/|node_modules|\/work\/|\/[\w.-]+\.(?:ts|js|mjs|cjs):\d+)/],
];

/** Why an answer is not acceptable, or null when it is. */
function problemWith({ status, text }: Answer): string | null {
  if (status >= 500) return `HTTP ${status}`;
  for (const [what, pattern] of LEAKS) if (pattern.test(text)) return `${what} in the body`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `HTTP ${status} with a body that is not JSON`;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "a body that is not a JSON object";
  const { data, errors } = body as { data?: unknown; errors?: unknown };
  if (errors === undefined) {
    if (status >= 400) return `HTTP ${status} without errors`;
    return data !== undefined && data !== null ? null : "neither data nor errors";
  }
  if (!Array.isArray(errors) || errors.length === 0) return "errors that is not a non-empty list";
  for (const error of errors as { message?: unknown; extensions?: { code?: unknown } }[]) {
    if (typeof error?.message !== "string") return "an error without a message";
    if (typeof error.extensions?.code !== "string") return "an error without extensions.code";
    if (error.extensions.code === "INTERNAL_SERVER_ERROR" && error.message !== "Internal server error") {
      return "an unexpected error whose message is not masked (README: anything not recognised is masked as INTERNAL_SERVER_ERROR)";
    }
  }
  return null;
}

/** "status code" for the breakdown: the first error's code, or data. */
function classify({ status, text }: Answer): string {
  try {
    const body = JSON.parse(text) as { errors?: { extensions?: { code?: unknown } }[] };
    const code = body.errors?.[0]?.extensions?.code;
    return `${status} ${typeof code === "string" ? code : body.errors ? "(no code)" : "data"}`;
  } catch {
    return `${status} (not JSON)`;
  }
}

describe(`fuzzing the HTTP API (${storage} storage)`, () => {
  let t: TestApp;
  let origin: string;
  const sentinel = { tenantId: `sentinel-${randomUUID()}`, userId: "sentinel-user", dryRun: true };
  let sentinelRuleId: string;
  let sentinelBefore: number[];
  let rulesBefore: unknown;
  const answers: { request: FuzzRequest; answer: Answer; ms: number }[] = [];
  const timing = { generateMs: 0, sendMs: 0 };

  async function send(request: FuzzRequest): Promise<Answer> {
    const response = await fetch(`${t.app.url}${request.search ?? ""}`, {
      method: request.method,
      headers: { authorization: `Bearer ${t.adminToken}`, ...request.headers },
      body: request.body,
    });
    return { status: response.status, text: await response.text() };
  }

  async function sentinelRemaining(): Promise<number[]> {
    const { checkLimits } = await t.client.data(CheckLimitsDocument, { request: sentinel });
    return checkLimits.results.map((r) => r.remaining);
  }

  async function allRules(): Promise<unknown> {
    return (await t.client.data(ListRulesDocument, {})).rules;
  }

  beforeAll(async () => {
    t = await startTestApp(storage);
    origin = new URL(t.app.url).origin;
    const { createRule } = await t.client.data(CreateRuleDocument, {
      input: { tenantId: sentinel.tenantId, name: "sentinel", scope: ["USER"], algorithm: "SLIDING_WINDOW_LOG", limit: 1_000, window: 1, windowUnit: "DAYS" },
    });
    sentinelRuleId = createRule.id;
    for (let i = 0; i < 3; i++) await t.client.data(CheckLimitsDocument, { request: { ...sentinel, dryRun: false } });
    sentinelBefore = await sentinelRemaining();
    rulesBefore = await allRules();

    let started = performance.now();
    const requests = fc.sample(fuzzRequest, { numRuns: REQUESTS, seed: SEED });
    timing.generateMs = performance.now() - started;
    started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < requests.length) {
          const request = requests[next++]!;
          const sentAt = performance.now();
          const answer = await send(request);
          answers.push({ request, answer, ms: performance.now() - sentAt });
        }
      }),
    );
    timing.sendMs = performance.now() - started;
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it(`answers every one of ${REQUESTS} malformed or hostile requests with a proper GraphQL response: never a 5xx, never a stack trace or a file path`, () => {
    const breakdown = new Map<string, number>();
    for (const { answer } of answers) breakdown.set(classify(answer), (breakdown.get(classify(answer)) ?? 0) + 1);
    const kinds = new Map<string, number>();
    for (const { request } of answers) kinds.set(request.kind, (kinds.get(request.kind) ?? 0) + 1);
    const problems = answers.flatMap(({ request, answer }) => {
      const problem = problemWith(answer);
      return problem === null ? [] : [{ problem, kind: request.kind, status: answer.status, answer: answer.text.slice(0, 300), request: describeRequest(request) }];
    });
    console.log(
      [
        `fuzz: ${answers.length} requests (FUZZ_REQUESTS=${REQUESTS}, FUZZ_SEED=${SEED}, ${storage} storage), generated in ${Math.round(timing.generateMs)} ms, sent in ${Math.round(timing.sendMs)} ms`,
        `  slowest by generator: ${slowest(answers).map(([kind, ms]) => `${kind} ${Math.round(ms)} ms`).join(", ")}`,
        ...(process.env.FUZZ_DEBUG ? [...answers].sort((a, b) => b.ms - a.ms).slice(0, 8).map((a) => `  slow: ${Math.round(a.ms)} ms ${a.request.kind} ${describeRequest(a.request).slice(0, 200)}`) : []),
        `  by generator: ${[...kinds].sort((a, b) => b[1] - a[1]).map(([kind, n]) => `${kind} ${n}`).join(", ")}`,
        "  by answer (HTTP status, errors[0].extensions.code):",
        ...[...breakdown].sort((a, b) => b[1] - a[1]).map(([answer, n]) => `    ${String(n).padStart(5)}  ${answer}`),
        `  unacceptable answers: ${problems.length}`,
        ...summarise(problems.map((p) => p.problem)).map(([problem, n]) => `    ${String(n).padStart(5)}  ${problem}`),
        ...firstOfEach(problems).map((p) => `  e.g. ${p.problem}: ${p.request}\n       -> HTTP ${p.status} ${p.answer}`),
      ].join("\n"),
    );
    expect(answers).toHaveLength(REQUESTS);
    expect(problems.slice(0, 5), `${problems.length} unacceptable answers (FUZZ_SEED=${SEED}); the first ones`).toEqual([]);
  });

  it("meets every costly request as its generator expects: fan-outs refused past MAX_QUERY_FIELDS, check multiplication refused naming the cap, no valid token answered 401 with nothing compiled", () => {
    const costly = answers.filter(({ request }) => request.expected !== undefined);
    const unexpected = costly.filter(({ request, answer }) => (JSON.parse(answer.text) as { errors?: { extensions: { code: string } }[] }).errors?.[0]?.extensions.code !== (request.expected === "data" ? undefined : request.expected));
    expect(unexpected.map(({ request, answer }) => `${request.kind} expected ${request.expected}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`)).toEqual([]);
    for (const { request, answer } of costly) {
      if (request.kind === "alias multiplication") expect(answer.text).toContain("at most 1000 checks in one operation");
      if (request.kind === "no valid token") expect(answer.status).toBe(401);
    }
    const compiledTexts = new Set(compilations.mock.calls.map(([query]) => query));
    const withoutTokenTexts = costly.filter(({ request }) => request.kind === "no valid token").map(({ request }) => (JSON.parse(request.body as string) as { query: string }).query);
    expect(withoutTokenTexts.length).toBeGreaterThan(0);
    expect(withoutTokenTexts.filter((query) => compiledTexts.has(query))).toEqual([]);
  });

  it("is still up afterwards: GET /healthz answers 200 and a real checkLimits works", async () => {
    const health = await fetch(`${origin}/healthz`);
    expect(health.status).toBe(200);
    const { checkLimits } = await t.client.data(CheckLimitsDocument, { request: { tenantId: `after-${randomUUID()}`, userId: "u1" } });
    expect(checkLimits.allowed).toBe(true);
  });

  it("changed no rule", async () => {
    expect(await allRules()).toEqual(rulesBefore);
  });

  it("counted nothing against the sentinel rule's bucket", async () => {
    expect(sentinelBefore).toEqual([1_000 - 3 - 1]);
    expect(await sentinelRemaining()).toEqual(sentinelBefore);
    expect((await t.client.data(GetRuleDocument, { id: sentinelRuleId })).rule?.version).toBe(1);
  });

  // Answers the fuzz meets only by chance, sent on purpose. They run last: the last one uses up the admin token's mutation budget.

  it("masks an unexpected error's message (a subscription sent over HTTP) as \"Internal server error\"", async () => {
    const answer = await send({ kind: "subscription over HTTP", method: "POST", headers: JSON_TYPE, body: JSON.stringify({ query: "subscription { ruleChanges { ruleId } }" }) });
    expect(problemWith(answer), answer.text).toBeNull();
  });

  it("answers a GET whose query string is longer than Node's header limit (16 KiB) with a JSON error carrying a code", async () => {
    const query = `{ ${"__typename ".repeat(2_000)}}`;
    const answer = await send({ kind: "long GET", method: "GET", search: `?query=${encodeUri(query)}`, headers: { "apollo-require-preflight": "true" } });
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(problemWith(answer), `HTTP ${answer.status} ${JSON.stringify(answer.text)}`).toBeNull();
  });

  it("answers a subscription whose @include names an undeclared variable with a 4xx, not a 5xx", async () => {
    const answer = await send({ kind: "subscription with @include(if: $v)", method: "POST", headers: JSON_TYPE, body: JSON.stringify({ query: "subscription { __typename @include(if: $v) }" }) });
    expect(problemWith(answer), answer.text).toBeNull();
    expect(answer.status).toBeLessThan(500);
  });

  it("answers mutations past ADMIN_MUTATIONS_PER_MINUTE with TOO_MANY_REQUESTS and a 4xx, not a 5xx", async () => {
    let answer: Answer | null = null;
    for (let i = 0; i <= t.settings.adminMutationsPerMinute; i++) {
      answer = await send({ kind: "mutation flood", method: "POST", headers: JSON_TYPE, body: JSON.stringify({ query: `mutation { deleteRule(id: "${randomUUID()}") }` }) });
      if (classify(answer).endsWith("TOO_MANY_REQUESTS")) break;
    }
    expect(classify(answer!)).toMatch(/ TOO_MANY_REQUESTS$/);
    expect(answer!.status, answer!.text).toBeGreaterThanOrEqual(400);
    expect(answer!.status, answer!.text).toBeLessThan(500);
  });
});

function summarise(values: string[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]);
}

/** Total time spent answering each generator's requests, largest first. */
function slowest(answers: { request: FuzzRequest; ms: number }[]): [string, number][] {
  const totals = new Map<string, number>();
  for (const { request, ms } of answers) totals.set(request.kind, (totals.get(request.kind) ?? 0) + ms);
  return [...totals].sort((a, b) => b[1] - a[1]).slice(0, 5);
}

/** The first problem of each kind, to show what it looks like. */
function firstOfEach<P extends { problem: string }>(problems: P[]): P[] {
  const seen = new Set<string>();
  return problems.filter((p) => !seen.has(p.problem) && seen.add(p.problem));
}

function describeRequest(request: FuzzRequest): string {
  const body = request.body === undefined ? "" : typeof request.body === "string" ? request.body : `<${request.body.length} bytes>`;
  return `${request.method} /graphql${(request.search ?? "").slice(0, 200)} ${JSON.stringify(request.headers)} ${body.slice(0, 300)}${body.length > 300 ? `… (${body.length} chars)` : ""}`;
}
