/**
 * The only place domain failures become GraphQL errors. Each carries a literal
 * extensions.code; anything not recognised is masked as INTERNAL_SERVER_ERROR
 * (and logged with its request id, see request-logging.ts), so no stack trace
 * or internal message reaches a caller.
 */

import { HeaderMap } from "@apollo/server";
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
  BAD_REQUEST: "BAD_REQUEST",
  SUBSCRIBER_TOO_SLOW: "SUBSCRIBER_TOO_SLOW",
  TOO_MANY_SUBSCRIPTIONS: "TOO_MANY_SUBSCRIPTIONS",
  INTERNAL_SERVER_ERROR: "INTERNAL_SERVER_ERROR",
} as const;

/** Codes raised by GraphQL itself (parse, validation, coercion) or by us, passed through as they are; never INTERNAL_SERVER_ERROR, which is masked. */
const PUBLIC_CODES = new Set<string>([
  ...Object.values(ErrorCode).filter((code) => code !== ErrorCode.INTERNAL_SERVER_ERROR),
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "PERSISTED_QUERY_NOT_FOUND",
  "PERSISTED_QUERY_NOT_SUPPORTED",
  "OPERATION_RESOLUTION_FAILURE",
]);

/** Turns a thrown domain error into the GraphQL error the caller sees; null for anything unexpected. */
export function toGraphQLError(error: unknown): GraphQLError | null {
  if (error instanceof ValidationError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.BAD_USER_INPUT, field: error.field } });
  }
  if (error instanceof NotFoundError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.NOT_FOUND } });
  if (error instanceof ConflictError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.CONFLICT } });
  if (error instanceof UnavailableError) {
    if (error.retryAfter === null) return new GraphQLError(error.message, { extensions: { code: ErrorCode.SERVICE_UNAVAILABLE } });
    return retryLater(error.message, ErrorCode.SERVICE_UNAVAILABLE, 503, error.retryAfter);
  }
  if (error instanceof UnauthenticatedError) {
    return new GraphQLError(error.message, { extensions: { code: ErrorCode.UNAUTHENTICATED, http: { status: 401 } } });
  }
  if (error instanceof ForbiddenError) return new GraphQLError(error.message, { extensions: { code: ErrorCode.FORBIDDEN } });
  if (error instanceof RateLimitedError) return retryLater(error.message, ErrorCode.TOO_MANY_REQUESTS, 429, error.retryAfter);
  return null;
}

/** A refusal of the whole request for a while: its code, the seconds to wait in extensions.retryAfter, and the HTTP status with Retry-After. */
function retryLater(message: string, code: string, status: number, retryAfter: number): GraphQLError {
  return new GraphQLError(message, { extensions: { code, retryAfter, http: { status, headers: new HeaderMap([["retry-after", String(retryAfter)]]) } } });
}

/** An error a caller is meant to see: a domain failure, GraphQL's own (parse, validation, coercion), or one Apollo marks as the request's fault. */
export function isExpected(error: GraphQLError): boolean {
  return toGraphQLError(unwrapResolverError(error)) !== null || publicCode(error.extensions?.code, error) !== null || refusedArgument(error) !== null;
}

/**
 * graphql's refusal of a field's argument as the operation runs, its words:
 * a variable declared nullable with a default (allowed where the argument is
 * non-null) sent as an explicit null. Every other argument is refused before
 * anything runs (validation, the coercion of variables); this one only once
 * its field runs, as an error without a code.
 */
const REFUSED_ARGUMENT = /^Argument "([_A-Za-z][_0-9A-Za-z]*)" (?:of non-null type "[^"]*" must not be null|has invalid value .*)\.$/s;

/** The argument graphql refused (see REFUSED_ARGUMENT), or null when the error is not such a refusal. */
function refusedArgument(error: unknown): string | null {
  if (!(error instanceof GraphQLError) || error.extensions?.code !== undefined) return null;
  const original = error.originalError;
  if (original !== undefined && !(original instanceof GraphQLError && original.message === error.message)) return null;
  return REFUSED_ARGUMENT.exec(error.message)?.[1] ?? null;
}

/** How errors are shown to callers: formatError, or it without graphql's suggestions (see errorFormatter). */
export type ErrorFormatter = (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;

/** Every error as the caller sees it: domain failures with their codes, anything unexpected masked. */
export function formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const mapped = toGraphQLError(unwrapResolverError(error));
  if (mapped) return { message: mapped.message, locations: formatted.locations, path: formatted.path, extensions: publicExtensions(mapped.extensions) };
  // The caller's input, as a check's own refusals are: BAD_USER_INPUT naming the argument.
  const argument = refusedArgument(error);
  if (argument !== null) return { message: formatted.message, locations: formatted.locations, path: formatted.path, extensions: { code: ErrorCode.BAD_USER_INPUT, field: argument } };
  const code = publicCode(formatted.extensions?.code, error);
  if (code !== null) {
    return { message: formatted.message, locations: formatted.locations, path: formatted.path, extensions: { ...publicExtensions(formatted.extensions!), code } };
  }
  return { message: "Internal server error", path: formatted.path, extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
}

/**
 * The code a caller may see for an error that is not a domain failure: its
 * own when public, BAD_REQUEST when Apollo gave it a 4xx status without a
 * code (persisted-query mismatches), else null (masked).
 */
function publicCode(code: unknown, error: unknown): string | null {
  if (typeof code === "string" && PUBLIC_CODES.has(code)) return code;
  const status = error instanceof GraphQLError ? (error.extensions?.http as { status?: unknown } | undefined)?.status : undefined;
  return typeof status === "number" && status >= 400 && status < 500 ? ErrorCode.BAD_REQUEST : null;
}

/** graphql's hint at the end of a message: ' Did you mean "tenantId"?', ' Did you mean the enum value "FIXED_WINDOW"?'. */
const SUGGESTION = / ?Did you mean .+\?$/;

/**
 * formatError, and with `suggestions` off, also without graphql's "Did you
 * mean …?" hints, which name the schema's fields, types, arguments and enum
 * values: with introspection off they would give away what it hides (Apollo's
 * hideSchemaDetailsFromClientErrors does so for validation only; this covers
 * the coercion of variables too, and every path: Apollo, the fast path and
 * graphql-ws). No message of Floodgate's own ends in such a hint.
 */
export function errorFormatter({ suggestions }: { suggestions: boolean }): ErrorFormatter {
  if (suggestions) return formatError;
  return (formatted, error) => {
    const shown = formatError(formatted, error);
    return SUGGESTION.test(shown.message) ? { ...shown, message: shown.message.replace(SUGGESTION, "") } : shown;
  };
}

/** An ErrorFormatter applied to an error that does not pass through Apollo (subscriptions over WebSocket). */
export function formatGraphQLError(error: GraphQLError, format: ErrorFormatter): GraphQLFormattedError {
  return format(error.toJSON(), error);
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

/** The same error with an extensions.code: GraphQL's own errors (parse, validation, coercion) come without one. */
export function coded(error: GraphQLError, code: string): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...error.extensions, code },
  });
}

/** A subscription refused because its socket already holds `max` (MAX_SUBSCRIPTIONS_PER_SOCKET); the others go on. */
export function tooManySubscriptions(max: number): GraphQLError {
  return new GraphQLError(
    `this socket already holds ${max} subscriptions, the most one may (MAX_SUBSCRIPTIONS_PER_SOCKET): complete one first, or open another socket`,
    { extensions: { code: ErrorCode.TOO_MANY_SUBSCRIPTIONS } },
  );
}
