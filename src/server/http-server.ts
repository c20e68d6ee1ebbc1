/**
 * HTTP and WebSocket serving on one port: POST/GET /graphql through Apollo
 * Server (its framework-neutral executeHTTPGraphQLRequest, so no web framework
 * sits on the hot path), graphql-ws subscriptions on the same path, and the
 * health endpoints.
 */

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ApolloServer, HeaderMap, type HTTPGraphQLRequest } from "@apollo/server";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
  ApolloServerPluginSchemaReportingDisabled,
  ApolloServerPluginUsageReportingDisabled,
} from "@apollo/server/plugin/disabled";
import type { GraphQLSchema } from "graphql";
import { useServer } from "graphql-ws/use/ws";
import type { Registry } from "prom-client";
import { WebSocketServer } from "ws";
import { createContext, type ApiContext, type Services } from "../api/context.js";
import { formatError, toGraphQLError } from "../api/errors.js";
import { mutationRateLimit } from "../api/mutation-rate-limit.js";
import { requestLogging } from "../api/request-logging.js";
import { queryLimits } from "../api/query-limits.js";
import type { Principal } from "../domain/access.js";
import type { Logger } from "./logger.js";

export interface HttpServerOptions {
  schema: GraphQLSchema;
  services: Services;
  logger: Logger;
  introspection: boolean;
  maxBodyBytes: number;
  maxQueryDepth: number;
  maxQueryFields: number;
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
  const authenticate = (authorization: string | undefined) => authenticateWith(services, authorization);
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
      mutationRateLimit,
      requestLogging(logger),
    ],
    validationRules: [queryLimits(options.maxQueryDepth, options.maxQueryFields)],
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

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?", 1)[0];
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
    const headers = new HeaderMap();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    const httpGraphQLRequest: HTTPGraphQLRequest = {
      method: (req.method ?? "GET").toUpperCase(),
      headers,
      search: searchOf(req.url),
      body,
    };
    const response = await apollo.executeHTTPGraphQLRequest({
      httpGraphQLRequest,
      context: async () => createContext(services, await authenticate(headers.get("authorization")), requestId),
    });
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
  const principals = new WeakMap<object, Principal>();
  const sockets = new WebSocketServer({ server, path: "/graphql", maxPayload: options.maxBodyBytes });
  const subscriptions = useServer(
    {
      schema,
      onConnect: async ({ connectionParams, extra }) => {
        const authorization = connectionParams?.authorization;
        try {
          principals.set(extra.socket, await services.keys.authenticate(typeof authorization === "string" ? authorization : null));
          return true;
        } catch {
          return false;
        }
      },
      context: ({ extra }) => createContext(services, principals.get(extra.socket)!, randomUUID()),
    },
    sockets,
  );

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
      await subscriptions.dispose();
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
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
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
