/**
 * POST and GET /graphql: the caller authenticated before anything reads the
 * document, then the checks' fast path (src/api/fast-path/) when it can take
 * the request, and Apollo Server (its framework-neutral
 * executeHTTPGraphQLRequest, so no web framework sits on the hot path) for
 * everything else. Subscriptions are refused here: they run over graphql-ws
 * on the same path (subscription-server.ts).
 */

import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { HeaderMap, type ApolloServer, type HTTPGraphQLRequest, type HTTPGraphQLResponse } from "@apollo/server";
import { Kind, parse, type ParseOptions } from "graphql";
import { createContext, type ApiContext, type Services } from "../api/context.js";
import { nestsDeeperThan, tooDeeplyNested } from "../api/document-nesting.js";
import { toGraphQLError } from "../api/errors.js";
import type { CheckFastPath } from "../api/fast-path/check-fast-path.js";
import type { Principal } from "../domain/access.js";
import { MAX_DOCUMENT_NESTING } from "../domain/service-limits.js";
import { graphqlErrorBody, sendJson } from "./json-response.js";
import { BodyTooLarge, requestBodyOf } from "./request-body.js";
import type { GracefulShutdown } from "./shutdown.js";

export interface GraphQLEndpointOptions {
  services: Services;
  apollo: ApolloServer<ApiContext>;
  /** null: every request goes through Apollo. */
  fastPath: CheckFastPath | null;
  parseOptions: ParseOptions;
  maxBodyBytes: number;
  shutdown: GracefulShutdown;
}

export function graphqlEndpoint({ services, apollo, fastPath, parseOptions, maxBodyBytes, shutdown }: GraphQLEndpointOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  async function send(res: ServerResponse, response: HTTPGraphQLResponse): Promise<void> {
    shutdown.stopKeepAliveIfClosing(res);
    res.statusCode = response.status ?? 200;
    for (const [name, value] of response.headers) res.setHeader(name, value);
    if (response.body.kind === "complete") {
      res.end(response.body.string);
      return;
    }
    for await (const chunk of response.body.asyncIterator) res.write(chunk);
    res.end();
  }

  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = requestIdOf(req);
    res.setHeader("x-request-id", requestId);
    let body: unknown;
    try {
      body = await requestBodyOf(req, maxBodyBytes);
    } catch (error) {
      if (error instanceof BodyTooLarge) return sendJson(res, 413, graphqlErrorBody(`request body is larger than ${maxBodyBytes} bytes`, "BAD_REQUEST"));
      return sendJson(res, 400, graphqlErrorBody("request body is not valid JSON", "BAD_REQUEST"));
    }
    // The caller is known before anything reads the document: a request without a valid token costs no
    // parsing, validation or compilation, and leaves nothing behind. Apollo answers it as it always has
    // (its CSRF check, then the failed context: 401 UNAUTHENTICATED), and parses nothing before that.
    let principal: Principal;
    try {
      principal = await authenticateWith(services, req.headers.authorization);
    } catch (error) {
      return send(res, await apollo.executeHTTPGraphQLRequest({ httpGraphQLRequest: apolloRequestOf(req, body), context: () => Promise.reject(error) }));
    }
    const query = queryTextOf(body, req.url);
    if (query !== null && nestsDeeperThan(query, MAX_DOCUMENT_NESTING)) return sendJson(res, 400, graphqlErrorBody(tooDeeplyNested().message, "GRAPHQL_PARSE_FAILED"));
    if (query !== null && asksForSubscription(query, parseOptions)) {
      return sendJson(res, 400, graphqlErrorBody("subscriptions are served over WebSocket (the graphql-ws protocol) on /graphql, not over HTTP", "BAD_REQUEST"));
    }
    // One context, whichever path answers: the fast path hands on to Apollo only requests of which nothing has run.
    const context = createContext(services, principal, requestId);
    const fast = fastPath === null ? null : await fastPath.answer({ method: req.method, headers: req.headers, body }, context);
    return send(res, fast ?? (await apollo.executeHTTPGraphQLRequest({ httpGraphQLRequest: apolloRequestOf(req, body), context: async () => context })));
  };
}

/** The caller of a request, or the GraphQL error (UNAUTHENTICATED, 401) that answers it. */
async function authenticateWith(services: Services, authorization: string | undefined): Promise<Principal> {
  try {
    return await services.keys.authenticate(authorization);
  } catch (error) {
    throw toGraphQLError(error) ?? error;
  }
}

/**
 * Whether an HTTP request's document holds a subscription operation. Those
 * never run over HTTP; refusing them here, before Apollo validates them, also
 * keeps graphql-js 16's subscription validation (which throws on some
 * malformed documents) from answering 500. The substring test keeps this free
 * for everything else.
 */
function asksForSubscription(query: string, parseOptions: ParseOptions): boolean {
  if (!query.includes("subscription")) return false;
  try {
    return parse(query, parseOptions).definitions.some((d) => d.kind === Kind.OPERATION_DEFINITION && d.operation === "subscription");
  } catch {
    return false;
  }
}

/** The document's text: a POST body's `query`, or a GET's; null when there is none to read. */
function queryTextOf(body: unknown, url: string | undefined): string | null {
  const query = typeof body === "object" && body !== null ? (body as { query?: unknown }).query : new URLSearchParams(searchOf(url)).get("query");
  return typeof query === "string" ? query : null;
}

/** The caller's X-Request-Id when it is a sane token, else a fresh one: ids end up in logs, so they stay short and plain. */
function requestIdOf(req: IncomingMessage): string {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID();
}

function apolloRequestOf(req: IncomingMessage, body: unknown): HTTPGraphQLRequest {
  const headers = new HeaderMap();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return { method: (req.method ?? "GET").toUpperCase(), headers, search: searchOf(req.url), body };
}

/** The query string with its "?", as Apollo wants it (GET carries the operation there). */
function searchOf(url: string | undefined): string {
  const start = url?.indexOf("?") ?? -1;
  return start === -1 ? "" : url!.slice(start);
}
