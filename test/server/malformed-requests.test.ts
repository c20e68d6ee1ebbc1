/** Malformed and unwelcome requests: each gets a proper error, none a stack trace, and the server stays up. */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { STORAGES, expectNoStackTrace, newTenant, realStorageAvailable } from "../support/api.js";
import { MAX_DOCUMENT_NESTING } from "../../src/domain/service-limits.js";

const realAvailable = await realStorageAvailable();

interface RawResponse {
  status: number;
  contentType: string | null;
  text: string;
  json: unknown;
}

type GraphQLErrorBody = { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] };

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

for (const storage of STORAGES) {
  describe.runIf(storage === "embedded" || realAvailable)(`malformed requests over HTTP (${storage})`, () => {
    let t: TestApp;
    let graphqlUrl: string;
    let origin: string;

    beforeAll(async () => {
      t = await startTestApp(storage);
      graphqlUrl = t.app.url;
      origin = new URL(t.app.url).origin;
    });

    afterAll(async () => {
      await t?.stop();
    });

    /** Any request, as the admin; every response a test sees is also checked for stack traces. */
    async function send(url: string, init: RequestInit = {}): Promise<RawResponse> {
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${t.adminToken}`);
      const response = await fetch(url, { ...init, headers });
      const text = await response.text();
      expectNoStackTrace(text);
      return { status: response.status, contentType: response.headers.get("content-type"), text, json: parse(text) };
    }

    function post(body: string, headers: Record<string, string> = { "content-type": "application/json" }) {
      return send(graphqlUrl, { method: "POST", headers, body });
    }

    function errorsOf(response: RawResponse) {
      return (response.json as GraphQLErrorBody).errors ?? [];
    }

    /** The server still answers, both its health check and a real operation. */
    async function expectServerUp(): Promise<void> {
      expect((await send(`${origin}/healthz`)).status).toBe(200);
      const ok = await post(JSON.stringify({ query: "query ($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed } }", variables: { r: { tenantId: newTenant() } } }));
      expect(ok.status).toBe(200);
      expect(ok.json).toEqual({ data: { checkLimits: { allowed: true } } });
    }

    it("answers a body that is not JSON with 400 and an error code", async () => {
      const response = await post('{"query": "{ rules { id } }"');
      expect(response.status).toBe(400);
      expect(errorsOf(response)[0]?.extensions?.code).toEqual(expect.any(String));
    });

    it("answers a body over MAX_BODY_BYTES (1 MiB by default) with 413", async () => {
      const padding = "x".repeat((1 << 20) + 1024);
      const response = await post(JSON.stringify({ query: "{ rules { id } }", variables: { padding } }));
      expect(response.status).toBe(413);
      expect(errorsOf(response)[0]?.extensions?.code).toEqual(expect.any(String));
    });

    it("stays up after an oversized body", async () => {
      await post(JSON.stringify({ query: "{ rules { id } }", variables: { padding: "x".repeat(2 << 20) } }));
      await expectServerUp();
    });

    it("answers a query for an unknown field with GRAPHQL_VALIDATION_FAILED", async () => {
      const response = await post(JSON.stringify({ query: "{ rules { id noSuchField } }" }));
      expect(response.status).toBe(400);
      expect(errorsOf(response)[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");
    });

    it("answers a syntax error with GRAPHQL_PARSE_FAILED", async () => {
      const response = await post(JSON.stringify({ query: "{ rules { id " }));
      expect(response.status).toBe(400);
      expect(errorsOf(response)[0]?.extensions?.code).toBe("GRAPHQL_PARSE_FAILED");
    });

    // graphql-js parses, validates and executes by recursion: past some thousands of nested inline
    // fragments one of them exhausts the stack. Brackets are counted before that (MAX_DOCUMENT_NESTING).
    it("answers documents nested up to MAX_DOCUMENT_NESTING brackets, and refuses deeper ones with GRAPHQL_PARSE_FAILED, never a 500", async () => {
      const fragments = (depth: number) => `query { ${"... on Query { ".repeat(depth)}__typename${" }".repeat(depth)} }`;
      const deepest = await post(JSON.stringify({ query: fragments(MAX_DOCUMENT_NESTING - 1) }));
      expect([deepest.status, (deepest.json as GraphQLErrorBody).data]).toEqual([200, { __typename: "Query" }]);
      for (let depth = MAX_DOCUMENT_NESTING; depth <= 6000; depth += 250) {
        const response = await post(JSON.stringify({ query: fragments(depth) }));
        expect([depth, response.status, errorsOf(response)[0]]).toEqual([depth, 400, { message: `the document nests brackets more than ${MAX_DOCUMENT_NESTING} deep`, extensions: { code: "GRAPHQL_PARSE_FAILED" } }]);
      }
      // Brackets in strings and comments are text, not nesting.
      const quoted = await post(JSON.stringify({ query: `{ # ${"{".repeat(2000)}\n checkLimits(request: { tenantId: "${"[".repeat(900)}" }) { allowed } }` }));
      expect(quoted.status).toBe(200);
    });

    it("answers a body without a query with 400 and an error code", async () => {
      const response = await post(JSON.stringify({ variables: {} }));
      expect(response.status).toBe(400);
      expect(response.text).not.toBe("");
    });

    it("answers an empty POST body with 400", async () => {
      const response = await post("");
      expect(response.status).toBe(400);
    });

    it("GET /healthz answers 200 {status: \"ok\"}", async () => {
      const response = await send(`${origin}/healthz`);
      expect(response.status).toBe(200);
      expect(response.json).toEqual({ status: "ok" });
    });

    it("GET /readyz answers 200 with ready true", async () => {
      const response = await send(`${origin}/readyz`);
      expect(response.status).toBe(200);
      expect(response.json).toMatchObject({ ready: true });
    });

    it("an unknown path answers 404 with a JSON body", async () => {
      const response = await send(`${origin}/no/such/path`);
      expect(response.status).toBe(404);
      expect(response.contentType).toContain("application/json");
      expect(response.json).toEqual(expect.objectContaining({ error: expect.any(String) }));
    });

    it("refuses a GET /graphql?query=... without content-type or apollo-require-preflight (CSRF prevention) with 400", async () => {
      const response = await send(`${graphqlUrl}?query=${encodeURIComponent("{ rules { id } }")}`);
      expect(response.status).toBe(400);
      expect(response.text).not.toContain('"data"');
    });

    it("serves the same GET /graphql?query=... once it carries apollo-require-preflight", async () => {
      const response = await send(`${graphqlUrl}?query=${encodeURIComponent("{ __typename }")}`, { headers: { "apollo-require-preflight": "true" } });
      expect(response.status).toBe(200);
      expect(response.json).toEqual({ data: { __typename: "Query" } });
    });

    it("refuses a mutation sent as GET", async () => {
      const query = encodeURIComponent(`mutation { createRule(input: {tenantId: "${newTenant()}", name: "x", limit: 1, window: 1}) { id } }`);
      const response = await send(`${graphqlUrl}?query=${query}`, { headers: { "apollo-require-preflight": "true" } });
      expect(response.status).toBe(405);
    });

    it("stays up and keeps serving after every kind of malformed request", async () => {
      await post("not json at all");
      await post(JSON.stringify({ query: "{ rules { id noSuchField } }" }));
      await post(JSON.stringify({ query: "{" }));
      await post(JSON.stringify([1, 2, 3]));
      await post(JSON.stringify({ query: 42 }));
      await post(JSON.stringify({ query: "{ rules { id } }", variables: "nope" }));
      await send(`${graphqlUrl}?query=${encodeURIComponent("{ rules { id } }")}`);
      await expectServerUp();
    });
  });
}
