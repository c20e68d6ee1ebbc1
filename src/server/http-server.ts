/**
 * HTTP and WebSocket serving on one port: POST/GET /graphql through Apollo
 * Server (its framework-neutral executeHTTPGraphQLRequest, so no web framework
 * sits on the hot path), checks through their compiled fast path
 * (src/api/check-operations.ts) when they can take it, graphql-ws
 * subscriptions on the same path, and the health endpoints.
 */

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ApolloServer, HeaderMap, type HTTPGraphQLRequest, type HTTPGraphQLResponse } from "@apollo/server";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
  ApolloServerPluginSchemaReportingDisabled,
  ApolloServerPluginUsageReportingDisabled,
} from "@apollo/server/plugin/disabled";
import { Kind, parse, type GraphQLSchema } from "graphql";
import type { Registry } from "prom-client";
import { CheckOperations, type CheckRequestBody, type GraphQLAnswer } from "../api/check-operations.js";
import { createContext, type ApiContext, type Services } from "../api/context.js";
import { formatError, toGraphQLError } from "../api/errors.js";
import { mutationLimit } from "../api/mutation-limit.js";
import { requestLogging } from "../api/request-logging.js";
import { queryLimits } from "../api/query-limits.js";
import type { Principal } from "../domain/access.js";
import type { Logger } from "./logger.js";
import { serveSubscriptions } from "./subscription-server.js";

export interface HttpServerOptions {
  schema: GraphQLSchema;
  services: Services;
  logger: Logger;
  introspection: boolean;
  maxBodyBytes: number;
  maxQueryDepth: number;
  maxQueryFields: number;
  /** Check documents kept compiled for the fast path; 0: every request goes through Apollo. */
  fastPathCacheSize: number;
  /** MAX_SUBSCRIPTIONS_PER_SOCKET: subscriptions one WebSocket may hold at once. */
  maxSubscriptionsPerSocket: number;
  /** MAX_SOCKETS_PER_KEY: WebSockets one API key may hold open at once on this instance. */
  maxSocketsPerKey: number;
  /** API_KEY_CACHE_MS: how often every open WebSocket's key is looked up again. */
  apiKeyCacheMs: number;
  /** How long shutdown waits for requests in flight before closing their connections. */
  shutdownTimeoutMs: number;
  /** Prometheus registry served at GET /metrics. */
  metrics: Registry;
  /** Readiness: the body of GET /readyz, and whether it answers 200 or 503. */
  readiness: () => { ready: boolean; [detail: string]: unknown };
}

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

class BodyTooLarge extends Error {}

/**
 * Whether an HTTP request's document holds a subscription operation. Those
 * never run over HTTP; refusing them here, before Apollo validates them, also
 * keeps graphql-js 16's subscription validation (which throws on some
 * malformed documents) from answering 500. The substring test keeps this free
 * for everything else.
 */
function asksForSubscription(body: unknown, url: string | undefined): boolean {
  const query = typeof body === "object" && body !== null ? (body as { query?: unknown }).query : new URLSearchParams(searchOf(url)).get("query");
  if (typeof query !== "string" || !query.includes("subscription")) return false;
  try {
    return parse(query).definitions.some((d) => d.kind === Kind.OPERATION_DEFINITION && d.operation === "subscription");
  } catch {
    return false;
  }
}

/** The caller of a request, or the GraphQL error (UNAUTHENTICATED, 401) that answers it. */
async function authenticateWith(services: Services, authorization: string | undefined): Promise<Principal> {
  try {
    return await services.keys.authenticate(authorization);
  } catch (error) {
    throw toGraphQLError(error) ?? error;
  }
}

export async function startHttpServer(options: HttpServerOptions, port: number, host: string): Promise<RunningServer> {
  const { schema, services, logger } = options;
  const validationRules = [queryLimits(options.maxQueryDepth, options.maxQueryFields)];
  // A document is refused past this many tokens before it is even parsed whole: a legitimate one is far smaller.
  const parseOptions = { maxTokens: options.maxQueryFields * 10 };
  const checks =
    options.fastPathCacheSize > 0 ? new CheckOperations({ schema, parseOptions, validationRules, capacity: options.fastPathCacheSize, logger }) : null;
  const apollo = new ApolloServer<ApiContext>({
    schema,
    introspection: options.introspection,
    csrfPrevention: true,
    includeStacktraceInErrorResponses: false,
    formatError,
    // Apollo installs some plugins unless told not to. Each is off here, so that
    // no plugin of Apollo's own runs per request or per field: cache control (it hooks
    // every resolved field, and nothing here is cacheable: every check counts),
    // usage and schema reporting and inline traces (they would activate with an
    // Apollo key in the environment), and the landing page.
    plugins: [
      ApolloServerPluginCacheControlDisabled(),
      ApolloServerPluginUsageReportingDisabled(),
      ApolloServerPluginSchemaReportingDisabled(),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginLandingPageDisabled(),
      mutationLimit,
      requestLogging(logger),
    ],
    validationRules,
    parseOptions,
    // Apollo's default pretty-prints every response (JSON.stringify(value, null, 2)).
    stringifyResult: (value) => JSON.stringify(value),
    // Parsed and validated documents are cached by Apollo's default document
    // store (keyed by the query's sha256), and automatic persisted queries are
    // on with its default in-memory cache: a client may send only the hash.
  });
  await apollo.start();

  let closing = false;
  const server: Server = createServer((req, res) => {
    // Once shutting down, every response ends its connection, so keep-alive cannot hold the shutdown open.
    if (closing) res.shouldKeepAlive = false;
    route(req, res).catch((error: unknown) => {
      logger.error({ err: error }, "request failed");
      if (!res.headersSent) json(res, 500, { error: "internal server error" });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  // A request Node refuses before it reaches us (headers too large, malformed) still gets a JSON answer.
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
    const body = JSON.stringify(graphqlError(tooLarge ? "request headers (or the query string) are too large" : "malformed HTTP request", "BAD_REQUEST"));
    const status = tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = pathOf(req.url ?? "/");
    if (path === "/graphql") return graphql(req, res);
    if (path === "/healthz" && req.method === "GET") return json(res, 200, { status: "ok" });
    if (path === "/metrics" && req.method === "GET") {
      res.writeHead(200, { "content-type": options.metrics.contentType });
      res.end(await options.metrics.metrics());
      return;
    }
    if (path === "/readyz" && req.method === "GET") {
      const readiness = options.readiness();
      return json(res, readiness.ready ? 200 : 503, readiness);
    }
    json(res, 404, { error: "not found", endpoints: ["/graphql", "/healthz", "/readyz", "/metrics"] });
  }

  async function graphql(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = requestIdOf(req);
    res.setHeader("x-request-id", requestId);
    let body: unknown;
    try {
      body = req.method === "POST" ? parseBody(await readBody(req, options.maxBodyBytes), req.headers["content-type"]) : undefined;
    } catch (error) {
      if (error instanceof BodyTooLarge) return json(res, 413, graphqlError(`request body is larger than ${options.maxBodyBytes} bytes`, "BAD_REQUEST"));
      return json(res, 400, graphqlError("request body is not valid JSON", "BAD_REQUEST"));
    }
    if (asksForSubscription(body, req.url)) {
      return json(res, 400, graphqlError("subscriptions are served over WebSocket (the graphql-ws protocol) on /graphql, not over HTTP", "BAD_REQUEST"));
    }
    // Authenticated once, whichever path answers: the fast path hands a request it cannot answer on to Apollo.
    let caller: Promise<Principal> | undefined;
    const context = async () => createContext(services, await (caller ??= authenticateWith(services, req.headers.authorization)), requestId);
    const check = checkRequestOf(req, body);
    const answer = checks !== null && check !== null ? await checks.run(check, context) : null;
    const response = answer === null ? await apollo.executeHTTPGraphQLRequest({ httpGraphQLRequest: apolloRequestOf(req, body), context }) : fastPathResponse(answer);
    if (closing) res.shouldKeepAlive = false;
    res.statusCode = response.status ?? 200;
    for (const [name, value] of response.headers) res.setHeader(name, value);
    if (response.body.kind === "complete") {
      res.end(response.body.string);
      return;
    }
    for await (const chunk of response.body.asyncIterator) res.write(chunk);
    res.end();
  }

  // A WebSocket authenticates once, in its connection_init payload; a bad token closes it with 4403.
  const subscriptions = serveSubscriptions(server, {
    schema,
    services,
    validationRules,
    parseOptions,
    maxPayloadBytes: options.maxBodyBytes,
    maxSubscriptionsPerSocket: options.maxSubscriptionsPerSocket,
    maxSocketsPerKey: options.maxSocketsPerKey,
    revalidateMs: options.apiKeyCacheMs,
    logger,
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = host === "0.0.0.0" || host === "::" ? "localhost" : host;
  return {
    url: `http://${shownHost}:${address.port}/graphql`,
    close: async () => {
      // Stop accepting first; requests in flight finish, idle keep-alive connections close.
      closing = true;
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await subscriptions.close();
      const deadline = setTimeout(() => {
        options.logger.warn({ timeoutMs: options.shutdownTimeoutMs }, "requests still running at the shutdown deadline: closing their connections");
        server.closeAllConnections();
      }, options.shutdownTimeoutMs);
      await drained;
      clearTimeout(deadline);
      await apollo.stop();
    },
  };
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

/**
 * A JSON media type: a POST carrying it was preflighted by any browser, so
 * Apollo's CSRF prevention lets it through (and anything else is Apollo's to
 * judge).
 */
const JSON_CONTENT_TYPE = /^application\/json[ \t]*(;|$)/i;
/** What Apollo answers a single result in for these Accept headers; others are negotiated by Apollo. */
const APOLLO_DEFAULT_ACCEPTS = new Set([undefined, "", "*/*", "application/json"]);
const APOLLO_JSON_HEADERS = new HeaderMap([["content-type", "application/json; charset=utf-8"]]);
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/**
 * The request the check fast path may try: a POST of JSON, answered in
 * Apollo's default content type, whose body holds a query text, no persisted
 * query, and variables and an operation name of the types Apollo accepts;
 * null sends it to Apollo.
 */
function checkRequestOf(req: IncomingMessage, body: unknown): CheckRequestBody | null {
  if (req.method !== "POST" || !JSON_CONTENT_TYPE.test(req.headers["content-type"] ?? "") || !APOLLO_DEFAULT_ACCEPTS.has(req.headers.accept)) return null;
  if (!isRecord(body)) return null;
  const { query, operationName, variables, extensions } = body;
  if (typeof query !== "string") return null;
  if (!(operationName === undefined || operationName === null || (typeof operationName === "string" && GRAPHQL_NAME.test(operationName)))) return null;
  if (!(variables === undefined || variables === null || isRecord(variables))) return null;
  if (!(extensions === undefined || extensions === null || (isRecord(extensions) && !("persistedQuery" in extensions)))) return null;
  return { query, operationName: operationName ?? undefined, variables: variables ?? undefined };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** As Apollo answers: the headers errors set, then its content type unless one of them set another. */
function fastPathResponse(answer: GraphQLAnswer): HTTPGraphQLResponse {
  const { status, headers } = answer.http;
  const body = { kind: "complete" as const, string: answer.body };
  if (headers.length === 0) return { status, headers: APOLLO_JSON_HEADERS, body };
  const fromErrors = new HeaderMap(headers);
  if (!fromErrors.has("content-type")) fromErrors.set("content-type", APOLLO_JSON_HEADERS.get("content-type")!);
  return { status, headers: fromErrors, body };
}

function pathOf(url: string): string {
  const end = url.indexOf("?");
  return end === -1 ? url : url.slice(0, end);
}

/** The query string with its "?", as Apollo wants it (GET carries the operation there). */
function searchOf(url: string | undefined): string {
  const start = url?.indexOf("?") ?? -1;
  return start === -1 ? "" : url!.slice(start);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new BodyTooLarge());
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8")));
    req.on("error", reject);
  });
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (text === "") return undefined;
  return contentType?.includes("json") ? JSON.parse(text) : text;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

function graphqlError(message: string, code: string) {
  return { errors: [{ message, extensions: { code } }] };
}
