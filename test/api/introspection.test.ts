/**
 * Standard tooling over HTTP: graphql-js's own getIntrospectionQuery() (what
 * GraphiQL, Apollo Sandbox, Altair and code generators send) is answered
 * under the default depth limit, which still refuses an ordinary document one
 * level too deep; and GraphiQL's page and assets are served to a browser when
 * GRAPHIQL is on (by default outside production), and not otherwise.
 */

import { getIntrospectionQuery, type IntrospectionQuery } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../harness/in-process-app.js";
import { startTestApp } from "../support/app.js";

const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/** `{ rules { rule { … id } } }`: 13 levels, one past the default limit of 12 (the schema nests 4 at most, so graphql reports the unknown field too). */
const THIRTEEN_LEVELS = `{ ${"rules { rule { ".repeat(6)}id${" }".repeat(12)} }`;

describe("introspection and GraphiQL over HTTP (defaults outside production)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp("embedded");
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("answers getIntrospectionQuery(), with its default options and with every option, under MAX_QUERY_DEPTH 12", async () => {
    expect(t.settings.maxQueryDepth).toBe(12);
    for (const query of [
      getIntrospectionQuery(),
      getIntrospectionQuery({ specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true }),
    ]) {
      const { status, data, errors } = await t.client.raw<IntrospectionQuery>({ query });
      expect(errors).toBeUndefined();
      expect(status).toBe(200);
      const queryType = data!.__schema.types.find((type) => type.name === "Query");
      expect(queryType?.kind === "OBJECT" && queryType.fields.map((field) => field.name)).toContain("checkLimits");
    }
  });

  it("still refuses an ordinary document 13 levels deep, and introspection deeper than the standard query", async () => {
    const deep = await t.client.raw({ query: THIRTEEN_LEVELS });
    expect(deep.status).toBe(400);
    expect(deep.errors?.map((error) => [error.message, error.extensions?.code])).toContainEqual([
      "the query is more than 12 levels deep; at most 12 are allowed",
      "GRAPHQL_VALIDATION_FAILED",
    ]);
    const deeperIntrospection = await t.client.raw({ query: getIntrospectionQuery({ typeDepth: 10 }) });
    expect(deeperIntrospection.errors?.map((error) => error.message)).toEqual([
      "the introspection is more than 15 levels deep; at most 15 are allowed (as deep as graphql-js's getIntrospectionQuery())",
    ]);
  });

  it("serves GraphiQL's page to a browser's GET of /graphql, and its assets from the installed packages", async () => {
    const page = await fetch(t.app.url, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    const html = await page.text();
    const scripts = [...html.matchAll(/<script src="([^"]+)"/g)].map((match) => match[1]);
    expect(scripts).toEqual(["graphiql/react.production.min.js", "graphiql/react-dom.production.min.js", "graphiql/graphiql.min.js", "graphiql/start.js"]);
    expect(html).not.toContain(t.adminToken);
    for (const script of scripts) {
      const asset = await fetch(new URL(script!, t.app.url));
      expect(asset.status, script).toBe(200);
      expect(asset.headers.get("content-type"), script).toBe("text/javascript; charset=utf-8");
    }
    const stylesheet = await fetch(new URL("graphiql/graphiql.min.css", t.app.url));
    expect([stylesheet.status, stylesheet.headers.get("content-type")]).toEqual([200, "text/css; charset=utf-8"]);
    expect((await fetch(new URL("graphiql/elsewhere.js", t.app.url))).status).toBe(404);
  });

  it("leaves every other GET of /graphql to the API: one without HTML in Accept, and one with a query", async () => {
    const plain = await fetch(t.app.url, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(plain.headers.get("content-type")).toContain("application/json");
    const withQuery = await fetch(`${t.app.url}?query=${encodeURIComponent("{ __typename }")}`, {
      headers: { accept: BROWSER_ACCEPT, authorization: `Bearer ${t.adminToken}`, "apollo-require-preflight": "true" },
    });
    expect([withQuery.status, await withQuery.json()]).toEqual([200, { data: { __typename: "Query" } }]);
  });
});

describe.each([
  ["in production", { NODE_ENV: "production" }, false],
  ["with GRAPHIQL=false", { GRAPHIQL: "false" }, false],
  ["in production with GRAPHIQL=true", { NODE_ENV: "production", GRAPHIQL: "true" }, true],
])("GraphiQL %s", (_, env, served) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp("embedded", env);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it(served ? "is served" : "is not served: a browser's GET of /graphql reaches the API, and no asset is there", async () => {
    const page = await fetch(t.app.url, { headers: { accept: BROWSER_ACCEPT } });
    expect(page.headers.get("content-type")).toBe(served ? "text/html; charset=utf-8" : "application/json; charset=utf-8");
    expect((await fetch(new URL("graphiql/graphiql.min.js", t.app.url))).status).toBe(served ? 200 : 404);
  });
});
