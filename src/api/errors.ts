/**
 * The only place domain failures become GraphQL errors. Each carries a literal
 * extensions.code; anything not recognised is masked as INTERNAL_SERVER_ERROR
 * (and logged with its request id, see request-logging.ts), so no stack trace
 * or internal message reaches a caller.
 */

import { unwrapResolverError } from "@apollo/server/errors";
import { GraphQLError, type GraphQLFormattedError } from "graphql";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  RateLimitedError,
  UnauthenticatedError,
  UnavailableError,
  ValidationError,
} from "../domain/errors.js";

export const ErrorCode = {
  BAD_USER_INPUT: "BAD_USER_INPUT",
  NOT_FOUND: "NOT_FOUND",
  CONFLICT: "CONFLICT",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  FORBIDDEN: "FORBIDDEN",
  SERVICE_UNAVAILABLE: "SERVICE_UNAVAILABLE",
  TOO_MANY_REQUESTS: "TOO_MANY_REQUESTS",
  SUBSCRIBER_TOO_SLOW: "SUBSCRIBER_TOO_SLOW",
  INTERNAL_SERVER_ERROR: "INTERNAL_SERVER_ERROR",
} as const;

/** Codes raised by GraphQL itself (parse, validation, coercion) or by us, passed through as they are. */
const PUBLIC_CODES = new Set<string>([
  ...Object.values(ErrorCode),
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "PERSISTED_QUERY_NOT_FOUND",
  "PERSISTED_QUERY_NOT_SUPPORTED",
  "OPERATION_RESOLUTION_FAILURE",
  "BAD_REQUEST",
]);

/** Turns a thrown domain error into the GraphQL error the caller sees; null for anything unexpected. */
export function toGraphQLError(error: unknown): GraphQLError | null {
  if (error instanceof ValidationError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.BAD_USER_INPUT, field: error.field } });
  }
  if (error instanceof NotFoundError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.NOT_FOUND } });
  if (error instanceof ConflictError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.CONFLICT } });
  if (error instanceof UnavailableError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.SERVICE_UNAVAILABLE } });
  }
  if (error instanceof UnauthenticatedError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.UNAUTHENTICATED, http: { status: 401 } } });
  }
  if (error instanceof ForbiddenError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.FORBIDDEN } });
  if (error instanceof RateLimitedError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.TOO_MANY_REQUESTS, retryAfter: error.retryAfter } });
  }
  return null;
}

/** An error a caller is meant to see: a domain failure or GraphQL's own (parse, validation, coercion). */
export function isExpected(error: GraphQLError): boolean {
  if (toGraphQLError(unwrapResolverError(error)) !== null) return true;
  const code = error.extensions?.code;
  return typeof code === "string" && PUBLIC_CODES.has(code) && code !== ErrorCode.INTERNAL_SERVER_ERROR;
}

/** Every error as the caller sees it: domain failures with their codes, anything unexpected masked. */
export function formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const mapped = toGraphQLError(unwrapResolverError(error));
  if (mapped) return { message: mapped.message, locations: formatted.locations, path: formatted.path, extensions: publicExtensions(mapped.extensions) };
  const code = formatted.extensions?.code;
  if (typeof code === "string" && PUBLIC_CODES.has(code)) {
    return { message: formatted.message, locations: formatted.locations, path: formatted.path, extensions: publicExtensions(formatted.extensions!) };
  }
  return { message: "Internal server error", path: formatted.path, extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
}

/** What a caller may see of an error's extensions: never a stack trace or the HTTP status meant for the server. */
function publicExtensions(extensions: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { stacktrace: _stacktrace, exception: _exception, http: _http, ...rest } = extensions;
  return rest;
}

/**
 * How a subscription ends when its subscriber reads too slowly: graphql-ws
 * sends it as the subscription's `error` message, which ends that one
 * subscription and leaves the socket and its other subscriptions open.
 */
export function subscriberTooSlow(buffered: number): GraphQLError {
  return new GraphQLError(
    `this subscription was ended because its reader fell more than ${buffered} events behind; those events and the ones after them were not delivered: subscribe again to carry on`,
    { extensions: { code: ErrorCode.SUBSCRIBER_TOO_SLOW } },
  );
}
