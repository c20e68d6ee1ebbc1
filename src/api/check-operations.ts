/**
 * The fast path of checks. A query made only of checkLimits and
 * checkLimitsBatch fields is compiled once per distinct text and operation
 * name (parsed and validated with the same options and rules Apollo Server
 * applies, and compiled by graphql-jit), and then runs without Apollo's request pipeline
 * and without graphql-js interpreting the document anew for every request.
 *
 * Everything else is Apollo's, which answers it as it always has: documents
 * that are not such queries, that do not parse or validate (Apollo words
 * those errors), and requests whose variables the compiled query refuses.
 * That refusal comes before any resolver runs, so handing the request on to
 * Apollo counts nothing twice, and Apollo's wording and status (400,
 * BAD_USER_INPUT) stay the only ones. What the fast path does answer, it
 * answers byte for byte as Apollo would (test/server/check-fast-path.test.ts):
 * the same resolvers, the same context (one DataLoader for all checks of the
 * operation), and errors through the same formatError and logging.
 */

import {
  BREAK,
  Kind,
  OperationTypeNode,
  getOperationAST,
  parse,
  specifiedRules,
  validate,
  visit,
  type DocumentNode,
  type GraphQLSchema,
  type ParseOptions,
  type SelectionNode,
  type ValidationRule,
} from "graphql";
import { compileQuery, isCompiledQuery, type CompiledQuery } from "graphql-jit";
import type { Logger } from "pino";
import type { ApiContext } from "./context.js";
import { formatExecutionErrors, type HttpPart } from "./errors.js";
import { logUnexpectedErrors } from "./request-logging.js";

/** A GraphQL request as it arrived over HTTP, its parts already of the right JSON types. */
export interface CheckRequestBody {
  query: string;
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
}

/** An answered operation: what its errors set of the HTTP response (nothing, unless it has errors that say so), and its JSON body. */
export interface GraphQLAnswer {
  http: HttpPart;
  body: string;
}

export interface CheckOperationsOptions {
  schema: GraphQLSchema;
  /** Apollo's parse options. */
  parseOptions: ParseOptions;
  /** The validation rules Apollo is given beside graphql's own (specifiedRules). */
  validationRules: readonly ValidationRule[];
  /** Distinct query texts kept compiled (or known not to be fast-path checks), least recently used dropped first. */
  capacity: number;
  logger: Logger;
}

const CHECK_FIELDS: ReadonlySet<string> = new Set(["checkLimits", "checkLimitsBatch"]);
/** A document without it is not a check: Apollo answers it, without the fast path parsing it first. */
const CHECK_FIELD_PREFIX = "checkLimits";
const NO_HTTP_PART: HttpPart = Object.freeze({ status: undefined, headers: [] });
const MAX_OPERATION_NAMES = 16;

/** One query text's operations, by operation name (null: none given); a null operation is Apollo's to answer. */
type Operations = Map<string | null, CompiledQuery | null>;

export class CheckOperations {
  /** By query text, so that finding one costs no new string per request. */
  private readonly documents = new Map<string, Operations>();
  private readonly rules: readonly ValidationRule[];

  constructor(private readonly options: CheckOperationsOptions) {
    this.rules = [...specifiedRules, ...options.validationRules];
  }

  /**
   * Runs the request when its document is a compiled check; null when Apollo
   * must answer it, and then nothing of it has run. `context` authenticates
   * the caller: when it fails, Apollo answers too (UNAUTHENTICATED, 401).
   */
  async run(request: CheckRequestBody, context: () => Promise<ApiContext>): Promise<GraphQLAnswer | null> {
    const compiled = this.compiled(request.query, request.operationName);
    if (compiled === null) return null;
    let contextValue: ApiContext;
    try {
      contextValue = await context();
    } catch {
      return null;
    }
    const result = await compiled.query(undefined, contextValue, request.variables);
    // Only refused variables give a result without data, and they are refused before any resolver runs.
    if (!("data" in result)) return null;
    if (result.errors === undefined) return { http: NO_HTTP_PART, body: JSON.stringify({ data: result.data }) };
    logUnexpectedErrors(this.options.logger, result.errors, contextValue.requestId);
    const { errors, http } = formatExecutionErrors(result.errors);
    // Apollo's order: errors before data.
    return { http, body: JSON.stringify({ errors, data: result.data }) };
  }

  private compiled(query: string, operationName: string | undefined): CompiledQuery | null {
    if (!query.includes(CHECK_FIELD_PREFIX)) return null;
    let operations = this.documents.get(query);
    if (operations === undefined) {
      if (this.documents.size >= this.options.capacity) this.documents.delete(this.documents.keys().next().value!);
      operations = new Map();
    } else {
      this.documents.delete(query);
    }
    this.documents.set(query, operations);
    const name = operationName ?? null;
    let compiled = operations.get(name);
    if (compiled === undefined) {
      compiled = this.compile(query, operationName);
      // A text sent with ever new operation names must not grow without bound either.
      if (operations.size >= MAX_OPERATION_NAMES) operations.delete(operations.keys().next().value!);
      operations.set(name, compiled);
    }
    return compiled;
  }

  private compile(query: string, operationName: string | undefined): CompiledQuery | null {
    let document: DocumentNode;
    try {
      document = parse(query, this.options.parseOptions);
    } catch {
      return null;
    }
    if (validate(this.options.schema, document, this.rules).length > 0) return null;
    const operation = getOperationAST(document, operationName);
    if (operation?.operation !== OperationTypeNode.QUERY || !operation.selectionSet.selections.every(isCheckField) || hasDirectives(document)) {
      return null;
    }
    const compiled = compileQuery(this.options.schema, document, operationName);
    return isCompiledQuery(compiled) ? compiled : null;
  }
}

function isCheckField(selection: SelectionNode): boolean {
  return selection.kind === Kind.FIELD && CHECK_FIELDS.has(selection.name.value);
}

/** @skip and @include are left to graphql-js: checks have no use for them, and the fast path need not match another implementation of them. */
function hasDirectives(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Directive() {
      found = true;
      return BREAK;
    },
  });
  return found;
}
