/**
 * formatExecutionErrors (the checks' fast path formats the errors of what it
 * ran itself) against Apollo Server formatting the same errors: the same
 * formatted errors, and the same status and headers taken from
 * `extensions.http`, for every kind of error a resolver can throw.
 */

import { ApolloServer, HeaderMap } from "@apollo/server";
import { ApolloServerPluginCacheControlDisabled } from "@apollo/server/plugin/disabled";
import { GraphQLError, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, GraphQLString, execute, parse } from "graphql";
import { describe, expect, it } from "vitest";
import { formatError, toGraphQLError } from "../../../src/api/errors.js";
import { formatExecutionErrors } from "../../../src/api/fast-path/apollo-response.js";
import { ForbiddenError, RateLimitedError, UnauthenticatedError, ValidationError } from "../../../src/domain/errors.js";

const THROWN: Record<string, () => unknown> = {
  rateLimited: () => toGraphQLError(new RateLimitedError("too many changes", 7)),
  unauthenticated: () => toGraphQLError(new UnauthenticatedError("who are you")),
  forbidden: () => new ForbiddenError("not yours"),
  invalid: () => new ValidationError("request.cost", "must be at least 1 (got 0)"),
  unexpected: () => new Error("the disk is on fire at /var/lib/x"),
  coded: () => new GraphQLError("teapot", { extensions: { code: "I_AM_A_TEAPOT", http: { status: 418, headers: new HeaderMap([["x-teapot", "yes"]]) } } }),
  oddHttp: () => new GraphQLError("odd", { extensions: { http: { status: "500" } } }),
};

const schema = new GraphQLSchema({
  query: new GraphQLObjectType({
    name: "Query",
    fields: Object.fromEntries(
      Object.entries(THROWN).map(([name, thrown]) => [
        name,
        {
          type: name === "invalid" ? new GraphQLNonNull(GraphQLString) : GraphQLString,
          resolve: () => {
            throw thrown();
          },
        },
      ]),
    ),
  }),
});

describe("formatExecutionErrors", () => {
  const documents = [...Object.keys(THROWN).map((name) => `{ ${name} }`), `{ ${Object.keys(THROWN).join(" ")} }`, "{ coded rateLimited }", "{ rateLimited coded }"];

  it.each(documents)("formats the errors of %s as Apollo does", async (query) => {
    // As the service configures it (without cache control, which would add a cache-control header).
    const apollo = new ApolloServer({ schema, formatError, includeStacktraceInErrorResponses: false, plugins: [ApolloServerPluginCacheControlDisabled()] });
    const byApollo = await apollo.executeOperation({ query });
    const result = await execute({ schema, document: parse(query) });
    const ours = formatExecutionErrors(result.errors ?? []);
    if (byApollo.body.kind !== "single") throw new Error("expected a single result");
    expect(ours.errors).toEqual(byApollo.body.singleResult.errors);
    expect(ours.http.status).toBe(byApollo.http.status);
    expect(new HeaderMap(ours.http.headers)).toEqual(byApollo.http.headers);
  });
});
