/**
 * graphql's "Did you mean …?" hints name the schema's fields, types,
 * arguments and enum values. With introspection off (production) they would
 * give away what introspection hides, so they are cut from every message:
 * validation and the coercion of variables, over HTTP through Apollo, for
 * documents the checks' fast path would take, and over graphql-ws. With
 * introspection on they stay, as help.
 */

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { openSocket } from "../support/subscriptions.js";

interface Answer {
  code: string | undefined;
  messages: string[];
}

/** Requests that would each draw a hint: [what, query, variables, the code, the message without its hint, the hint]. */
const HINTED: [string, string, Record<string, unknown> | undefined, string, string, string][] = [
  [
    "a misspelt field of a check (a document the fast path would take)",
    '{ checkLimits(request: { tenantId: "acme" }) { allowd } }',
    undefined,
    "GRAPHQL_VALIDATION_FAILED",
    'Cannot query field "allowd" on type "LimitDecision".',
    ' Did you mean "allowed"?',
  ],
  [
    "a misspelt argument",
    '{ checkLimits(requests: { tenantId: "acme" }) { allowed } }',
    undefined,
    "GRAPHQL_VALIDATION_FAILED",
    'Unknown argument "requests" on field "Query.checkLimits".',
    ' Did you mean "request"?',
  ],
  [
    "a misspelt type",
    "query ($r: CheckLimitInput!) { checkLimits(request: $r) { allowed } }",
    undefined,
    "GRAPHQL_VALIDATION_FAILED",
    'Unknown type "CheckLimitInput".',
    ' Did you mean "CheckLimitsInput"?',
  ],
  [
    "a misspelt enum value",
    'mutation { createRule(input: { tenantId: "acme", name: "x", limit: 1, window: 1, algorithm: FIXED_WINDOWS }) { id } }',
    undefined,
    "GRAPHQL_VALIDATION_FAILED",
    'Value "FIXED_WINDOWS" does not exist in "Algorithm" enum.',
    ' Did you mean the enum value "FIXED_WINDOW"?',
  ],
  [
    "a misspelt input field in the variables",
    "query ($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed } }",
    { r: { tenantId: "acme", userID: "u1" } },
    "BAD_USER_INPUT",
    'Variable "$r" got invalid value { tenantId: "acme", userID: "u1" }; Field "userID" is not defined by type "CheckLimitsInput".',
    ' Did you mean "userId"?',
  ],
];

describe.each([
  ["off", false],
  ["on", true],
])("with introspection %s", (_shown, introspection) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp("embedded", { INTROSPECTION: String(introspection) });
  });
  afterAll(() => t?.stop());

  const hinted = (message: string, hint: string) => (introspection ? message + hint : message);

  async function overHttp(query: string, variables: Record<string, unknown> | undefined): Promise<Answer> {
    const response = await fetch(t.app.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.adminToken}` },
      body: JSON.stringify({ query, variables }),
    });
    const { errors } = (await response.json()) as { errors: { message: string; extensions: { code: string } }[] };
    return { code: errors[0]?.extensions.code, messages: errors.map((error) => error.message) };
  }

  it.each(HINTED)(`%s: the hint is ${introspection ? "kept" : "cut"} over HTTP`, async (_what, query, variables, code, message, hint) => {
    const answer = await overHttp(query, variables);
    expect(answer.code).toBe(code);
    expect(answer.messages).toContain(hinted(message, hint));
  });

  it(`${introspection ? "keeps" : "cuts"} the hint over graphql-ws, where a misspelt subscription is GRAPHQL_VALIDATION_FAILED`, async () => {
    const socket = openSocket(t.app.url, t.adminToken);
    const errors = await socket.subscribe(`subscription { ruleChangez(tenantId: "${randomUUID()}") { ruleId } }`).ended();
    await socket.close();
    expect(errors).toEqual([
      {
        message: hinted('Cannot query field "ruleChangez" on type "Subscription".', ' Did you mean "ruleChanges"?'),
        locations: [{ line: 1, column: 16 }],
        extensions: { code: "GRAPHQL_VALIDATION_FAILED" },
      },
    ]);
  });
});
