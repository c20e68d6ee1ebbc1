/**
 * Subscriptions over graphql-ws on the HTTP server's /graphql. Only
 * subscriptions run here, under the same parse limits and validation as over
 * HTTP (queries and mutations go over HTTP, where the admin limit and every
 * other protection apply), and every refusal carries the code a caller would
 * get from Apollo over HTTP:
 *
 *   a document that does not parse      GRAPHQL_PARSE_FAILED
 *   a document that does not validate   GRAPHQL_VALIDATION_FAILED (too deep, too many fields, unknown fields, ...)
 *   a query or a mutation               BAD_REQUEST: the document is fine, the transport is wrong
 *                                       (HTTP answers a subscription the same way)
 *   no operation, or an unknown name    OPERATION_RESOLUTION_FAILURE
 *   variables of the wrong type         BAD_USER_INPUT
 *   one subscription too many           TOO_MANY_SUBSCRIPTIONS (MAX_SUBSCRIPTIONS_PER_SOCKET)
 *   a socket whose key was revoked      UNAUTHENTICATED (the socket is closing, see socket-sessions.ts)
 *
 * Each is sent as the subscription's `error` message: that subscription ends,
 * the socket and its other subscriptions stay open. Left to graphql-ws itself,
 * a parse error would close the whole socket as an internal error and the
 * others would reach the caller masked as INTERNAL_SERVER_ERROR.
 */

import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import {
  GraphQLError,
  getOperationAST,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type ExecutionArgs,
  type GraphQLSchema,
  type ParseOptions,
  type ValidationRule,
} from "graphql";
import type { SubscribePayload } from "graphql-ws";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import { createContext, type Services } from "../api/context.js";
import { nestsDeeperThan, tooDeeplyNested } from "../api/document-nesting.js";
import { MAX_DOCUMENT_NESTING } from "../domain/service-limits.js";
import { coded, ErrorCode, formatGraphQLError, tooManySubscriptions, type ErrorFormatter } from "../api/errors.js";
import type { Logger } from "./logger.js";
import { SocketSessions } from "./socket-sessions.js";

export interface SubscriptionServerOptions {
  schema: GraphQLSchema;
  services: Services;
  /** The validation rules HTTP applies beyond graphql's own (the query limits). */
  validationRules: readonly ValidationRule[];
  parseOptions: ParseOptions;
  /** Largest WebSocket message accepted. */
  maxPayloadBytes: number;
  /** MAX_SUBSCRIPTIONS_PER_SOCKET */
  maxSubscriptionsPerSocket: number;
  /** MAX_SOCKETS_PER_KEY */
  maxSocketsPerKey: number;
  /** API_KEY_CACHE_MS: how often every open socket's key is looked up again. */
  revalidateMs: number;
  /** How errors are shown, as over HTTP (without graphql's suggestions when introspection is off). */
  formatError: ErrorFormatter;
  logger: Logger;
}

export interface SubscriptionServer {
  /** Closes every socket with 1001 (going away) and stops accepting new ones. */
  close(): Promise<void>;
}

/** Over WebSocket, only subscription operations. */
const subscriptionsOnly: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    if (operation.operation !== "subscription") {
      context.reportError(
        new GraphQLError(`only subscriptions run over WebSocket: send ${operation.operation === "query" ? "queries" : "mutations"} over HTTP POST /graphql`, {
          nodes: [operation],
          extensions: { code: ErrorCode.BAD_REQUEST },
        }),
      );
    }
  },
});

/** The document of a subscribe message, parsed and validated, or the errors that refuse it, each with its code. */
function subscriptionDocument(
  payload: SubscribePayload,
  schema: GraphQLSchema,
  rules: readonly ValidationRule[],
  parseOptions: ParseOptions,
): DocumentNode | GraphQLError[] {
  if (nestsDeeperThan(payload.query, MAX_DOCUMENT_NESTING)) return [tooDeeplyNested()];
  let document: DocumentNode;
  try {
    document = parse(payload.query, parseOptions);
  } catch (error) {
    return [coded(error as GraphQLError, "GRAPHQL_PARSE_FAILED")];
  }
  const invalid = validate(schema, document, rules);
  if (invalid.length > 0) return invalid.map((error) => (error.extensions.code ? error : coded(error, "GRAPHQL_VALIDATION_FAILED")));
  if (getOperationAST(document, payload.operationName) === null) {
    const which = payload.operationName ? `no operation named ${JSON.stringify(payload.operationName)}` : "several operations and no operationName";
    return [new GraphQLError(`the document has ${which}`, { extensions: { code: "OPERATION_RESOLUTION_FAILURE" } })];
  }
  return document;
}

export function serveSubscriptions(server: Server, options: SubscriptionServerOptions): SubscriptionServer {
  const { schema, services } = options;
  const rules = [...specifiedRules, ...options.validationRules, subscriptionsOnly];
  const sessions = new SocketSessions({
    keys: services.keys,
    events: services.events,
    maxSocketsPerKey: options.maxSocketsPerKey,
    revalidateMs: options.revalidateMs,
    log: options.logger,
  });
  const sockets = new WebSocketServer({ server, path: "/graphql", maxPayload: options.maxPayloadBytes });
  const graphqlWs = useServer(
    {
      onConnect: ({ connectionParams, extra }) => sessions.open(extra.socket, connectionParams?.authorization),
      onClose: ({ extra }) => sessions.closed(extra.socket),
      onSubscribe: (ctx, _id, payload): ExecutionArgs | readonly GraphQLError[] => {
        const principal = sessions.principalOf(ctx.extra.socket);
        if (principal === null) return [new GraphQLError("the API key of this socket was revoked", { extensions: { code: ErrorCode.UNAUTHENTICATED } })];
        // graphql-ws has already counted this one among the socket's subscriptions.
        if (Object.keys(ctx.subscriptions).length > options.maxSubscriptionsPerSocket) return [tooManySubscriptions(options.maxSubscriptionsPerSocket)];
        const document = subscriptionDocument(payload, schema, rules, options.parseOptions);
        if (Array.isArray(document)) return document;
        const contextValue = createContext(services, principal, randomUUID());
        return { schema, document, operationName: payload.operationName, variableValues: payload.variables, contextValue };
      },
      // Errors carry their codes, and unexpected ones are masked, exactly as over HTTP.
      onError: (_ctx, _id, _payload, errors) => errors.map((error) => formatGraphQLError(error, options.formatError)),
      onNext: (_ctx, _id, _payload, _args, result) => {
        if (!result.errors) return result;
        // A result without data whose error has no path never reached a resolver: its variables did not fit
        // (Apollo's 400 BAD_USER_INPUT). A resolver's refusal (FORBIDDEN) has the field's path and its own code.
        const unstarted = !("data" in result);
        const errors = result.errors.map((error) => (unstarted && error.path === undefined && !error.extensions.code ? coded(error, ErrorCode.BAD_USER_INPUT) : error));
        return { ...result, errors: errors.map((error) => formatGraphQLError(error, options.formatError)) };
      },
    },
    sockets,
  );
  return {
    close: async () => {
      sessions.close();
      await graphqlWs.dispose();
    },
  };
}
