/**
 * HTTP and WebSocket serving on one port: /graphql over HTTP
 * (graphql-endpoint.ts: the checks' fast path, else Apollo Server) and over
 * graphql-ws (subscription-server.ts), the health endpoints and /metrics
 * (routes.ts), and a graceful shutdown (shutdown.ts).
 */

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { GraphQLSchema, ParseOptions } from "graphql";
import type { Registry } from "prom-client";
import type { Services } from "../api/context.js";
import { errorFormatter } from "../api/errors.js";
import { CheckFastPath } from "../api/fast-path/check-fast-path.js";
import { queryLimits } from "../api/query-limits.js";
import { startApollo } from "./apollo.js";
import { graphiql } from "./graphiql.js";
import { graphqlEndpoint } from "./graphql-endpoint.js";
import type { Logger } from "./logger.js";
import { answerMalformedRequests } from "./malformed-requests.js";
import { serveMetricsToAdmins } from "./metrics-endpoint.js";
import { serveDashboard } from "./dashboard-endpoint.js";
import { registerFastPathGauges } from "./metrics.js";
import { router, type Endpoints } from "./routes.js";
import { GracefulShutdown } from "./shutdown.js";
import { serveSubscriptions } from "./subscription-server.js";

export interface HttpServerOptions {
  schema: GraphQLSchema;
  services: Services;
  logger: Logger;
  introspection: boolean;
  /** GRAPHIQL: GraphiQL's page for a browser that GETs /graphql. */
  graphiql: boolean;
  maxBodyBytes: number;
  maxQueryDepth: number;
  maxQueryFields: number;
  /** Check documents kept compiled for the fast path; 0: every request goes through Apollo. */
  fastPathCacheSize: number;
  /** What those may hold in all, in estimated bytes. */
  fastPathCacheBytes: number;
  /** MAX_SUBSCRIPTIONS_PER_SOCKET: subscriptions one WebSocket may hold at once. */
  maxSubscriptionsPerSocket: number;
  /** MAX_SOCKETS_PER_KEY: WebSockets one API key may hold open at once on this instance. */
  maxSocketsPerKey: number;
  /** API_KEY_CACHE_MS: how often every open WebSocket's key is looked up again. */
  apiKeyCacheMs: number;
  /** How long shutdown waits for requests in flight before closing their connections. */
  shutdownTimeoutMs: number;
  /** Prometheus registry served at GET /metrics, to ADMIN keys and the holder of `metricsToken` (see metrics-endpoint.ts). */
  metrics: Registry;
  /** METRICS_TOKEN: a secret that opens GET /metrics and nothing else; none by default. */
  metricsToken?: string | null;
  readiness: Endpoints["readiness"];
}

export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

export async function startHttpServer(options: HttpServerOptions, port: number, host: string): Promise<RunningServer> {
  const { schema, services, logger } = options;
  const validationRules = [queryLimits(options.maxQueryDepth, options.maxQueryFields)];
  // A document is refused past this many tokens before it is even parsed whole: a legitimate one is far smaller.
  // Every parse takes them: Apollo's, the fast path's, the subscription test's and graphql-ws's.
  const parseOptions: ParseOptions = { maxTokens: options.maxQueryFields * 10 };
  // With introspection off, graphql's "Did you mean …?" hints would name what it hides.
  const formatError = errorFormatter({ suggestions: options.introspection });

  const fastPath =
    options.fastPathCacheSize > 0
      ? new CheckFastPath({ schema, parseOptions, validationRules, capacity: options.fastPathCacheSize, maxBytes: options.fastPathCacheBytes, formatError, logger })
      : null;
  if (fastPath !== null) registerFastPathGauges(options.metrics, fastPath);
  const apollo = await startApollo({ schema, introspection: options.introspection, formatError, validationRules, parseOptions, logger });
  const shutdown = new GracefulShutdown(options.shutdownTimeoutMs, logger);
  const route = router(
    {
      graphql: graphqlEndpoint({ services, apollo, fastPath, parseOptions, maxBodyBytes: options.maxBodyBytes, shutdown }),
      metrics: (req, res) => serveMetricsToAdmins(req, res, { registry: options.metrics, keys: services.keys, token: options.metricsToken ?? null }),
      graphiql: options.graphiql ? graphiql() : null,
      readiness: options.readiness,
      dashboard: serveDashboard(),
    },
    logger,
  );
  const server = createServer((req, res) => {
    shutdown.stopKeepAliveIfClosing(res);
    route(req, res);
  });
  server.keepAliveTimeout = 65_000;
  answerMalformedRequests(server);
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
    formatError,
    logger,
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = host === "0.0.0.0" || host === "::" ? "localhost" : host;
  return { url: `http://${shownHost}:${address.port}/graphql`, close: () => shutdown.close(server, { subscriptions, apollo }) };
}
