/**
 * The checks' fast path: the contract that it answers byte for byte as Apollo
 * Server would, held by test/api/fast-path/check-fast-path.test.ts (a server
 * with the fast path and one without answer the same requests, generated
 * ones too, with the same bytes, status and headers).
 *
 * Its three parts live in this folder:
 * - which requests it may take (here): a POST of JSON, answered in Apollo's
 *   default content type, whose body holds a query text, no persisted query,
 *   and variables and an operation name of the types Apollo accepts;
 * - which documents (compiled-checks.ts): queries of checkLimits and
 *   checkLimitsBatch fields only, valid, within the check cap, compiled once;
 * - how the answer is formed and its unexpected errors logged, as Apollo does
 *   (apollo-response.ts): the same resolvers, the same context (one DataLoader
 *   for all checks of the operation), errors through the same formatError and
 *   logging.
 *
 * Everything else is Apollo's, which answers it as it always has, including
 * requests whose variables the compiled query refuses: that refusal comes
 * before any resolver runs, so handing the request on to Apollo counts
 * nothing twice, and Apollo's wording and status (400, BAD_USER_INPUT) stay
 * the only ones.
 */

import type { HTTPGraphQLResponse } from "@apollo/server";
import type { Logger } from "pino";
import { holds } from "../../domain/access.js";
import type { ApiContext } from "../context.js";
import type { ErrorFormatter } from "../errors.js";
import { apolloResponse, logUnexpectedErrors } from "./apollo-response.js";
import { CompiledChecks, type CheckRequest, type CompiledChecksOptions } from "./compiled-checks.js";

/** What the fast path reads of an HTTP request (Node's IncomingMessage has these fields): its method, two headers, and its body as parsed. */
export interface HttpRequestParts {
  method?: string;
  headers: { "content-type"?: string; accept?: string };
  body: unknown;
}

export interface CheckFastPathOptions extends CompiledChecksOptions {
  /** Apollo's formatError. */
  formatError: ErrorFormatter;
  logger: Logger;
}

/**
 * A JSON media type: a POST carrying it was preflighted by any browser, so
 * Apollo's CSRF prevention lets it through (and anything else is Apollo's to
 * judge).
 */
const JSON_CONTENT_TYPE = /^application\/json[ \t]*(;|$)/i;
/** What Apollo answers a single result in for these Accept headers; others are negotiated by Apollo. */
const APOLLO_DEFAULT_ACCEPTS = new Set([undefined, "", "*/*", "application/json"]);
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

export class CheckFastPath {
  private readonly compiled: CompiledChecks;

  constructor(private readonly options: CheckFastPathOptions) {
    this.compiled = new CompiledChecks(options);
  }

  /** Query texts kept. */
  get size(): number {
    return this.compiled.size;
  }

  /** The estimated bytes they hold. */
  get bytes(): number {
    return this.compiled.bytes;
  }

  /**
   * The response to the request when the fast path can run it; null when
   * Apollo must answer it, and then nothing of it has run. The caller is
   * already authenticated (`context`); one without the right to check has
   * nothing compiled or kept for it.
   */
  async answer(request: HttpRequestParts, context: ApiContext): Promise<HTTPGraphQLResponse | null> {
    const check = checkRequestOf(request);
    if (check === null || !holds(context.principal, "checkLimits")) return null;
    const compiled = this.compiled.find(check);
    if (compiled === null) return null;
    const result = await compiled.query.query(undefined, context, check.variables);
    // Only refused variables give a result without data, and they are refused before any resolver runs.
    if (!("data" in result)) return null;
    if (result.errors !== undefined) logUnexpectedErrors(this.options.logger, result.errors, context.requestId);
    return apolloResponse(result, this.options.formatError);
  }
}

/** The check request the fast path may try (see the header); null sends it to Apollo. */
function checkRequestOf({ method, headers, body }: HttpRequestParts): CheckRequest | null {
  if (method !== "POST" || !JSON_CONTENT_TYPE.test(headers["content-type"] ?? "") || !APOLLO_DEFAULT_ACCEPTS.has(headers.accept)) return null;
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
