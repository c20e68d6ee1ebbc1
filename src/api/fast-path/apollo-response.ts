/**
 * The HTTP response Apollo Server sends for an operation it ran, formed here
 * for the checks the fast path runs itself (check-fast-path.ts), and the
 * logging of unexpected errors both paths share (request-logging.ts hooks it
 * into Apollo's).
 *
 * As Apollo forms it: the errors first (each given a code, INTERNAL_SERVER_ERROR
 * when it has none, its `extensions.http` taken for the response, then
 * formatError deciding what the caller sees), then the data, in one line of
 * JSON; the status and headers the errors set, and Apollo's content type
 * unless one of them set another.
 */

import { HeaderMap, type HTTPGraphQLResponse } from "@apollo/server";
import { unwrapResolverError } from "@apollo/server/errors";
import type { ExecutionResult, GraphQLError, GraphQLFormattedError } from "graphql";
import type { Logger } from "pino";
import { ErrorCode, formatError, isExpected, type ErrorFormatter } from "../errors.js";

/** What Apollo answers a single result in. */
const APOLLO_JSON_HEADERS = new HeaderMap([["content-type", "application/json; charset=utf-8"]]);

/** The response Apollo Server sends for this result of an operation that ran (one refused before any resolver ran has no data, and is Apollo's to answer). */
export function apolloResponse(result: ExecutionResult, format: ErrorFormatter): HTTPGraphQLResponse {
  if (result.errors === undefined) return { status: undefined, headers: APOLLO_JSON_HEADERS, body: complete({ data: result.data }) };
  const { errors, http } = formatExecutionErrors(result.errors, format);
  // Apollo's order: errors before data.
  const body = complete({ errors, data: result.data });
  if (http.headers.length === 0) return { status: http.status, headers: APOLLO_JSON_HEADERS, body };
  const fromErrors = new HeaderMap(http.headers);
  if (!fromErrors.has("content-type")) fromErrors.set("content-type", APOLLO_JSON_HEADERS.get("content-type")!);
  return { status: http.status, headers: fromErrors, body };
}

function complete(value: unknown): HTTPGraphQLResponse["body"] {
  return { kind: "complete", string: JSON.stringify(value) };
}

/**
 * The errors of an operation as Apollo Server sends them: Apollo first gives
 * every error a code (INTERNAL_SERVER_ERROR when it has none) and takes its
 * `extensions.http` part for the response (a status, the last one given
 * winning, and headers), then formatError (or the formatter given, the one
 * Apollo has) decides what the caller sees.
 */
export function formatExecutionErrors(errors: readonly GraphQLError[], format: ErrorFormatter = formatError): { errors: GraphQLFormattedError[]; http: HttpPart } {
  const http: HttpPart = { status: undefined, headers: [] };
  const formatted = errors.map((error) => {
    const { http: part, ...extensions }: Record<string, unknown> = { ...error.extensions, code: error.extensions?.code ?? ErrorCode.INTERNAL_SERVER_ERROR };
    if (isHttpPart(part)) {
      if (part.status) http.status = part.status;
      if (part.headers) http.headers.push(...part.headers);
    }
    return format({ ...error.toJSON(), extensions }, error);
  });
  return { errors: formatted, http };
}

/** What errors set of the HTTP response: its status, and headers in the order given. */
export interface HttpPart {
  status: number | undefined;
  headers: [string, string][];
}

/** An `extensions.http` as Apollo takes it: a numeric status and a Map of headers, each optional. */
function isHttpPart(part: unknown): part is { status?: number; headers?: Map<string, string> } {
  if (typeof part !== "object" || part === null) return false;
  const { status, headers } = part as { status?: unknown; headers?: unknown };
  return (status === undefined || typeof status === "number") && (headers === undefined || headers instanceof Map);
}

/** The errors a caller sees only as INTERNAL_SERVER_ERROR, logged with their cause and the request's id (whichever path ran the operation). */
export function logUnexpectedErrors(logger: Logger, errors: readonly GraphQLError[], requestId: string): void {
  for (const error of errors) {
    if (!isExpected(error)) logger.error({ err: unwrapResolverError(error), requestId }, "unexpected error");
  }
}
