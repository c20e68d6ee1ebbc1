/**
 * Which documents the checks' fast path (check-fast-path.ts) may run itself,
 * kept compiled. A query made only of checkLimits and checkLimitsBatch fields
 * is compiled once per distinct text and operation name (parsed and validated
 * with the same options and rules Apollo Server applies, and compiled by
 * graphql-jit), and then runs without Apollo's request pipeline and without
 * graphql-js interpreting the document anew for every request.
 *
 * Compiled documents are large (graphql-jit generates code for every field
 * selected: 10 KiB for one checkLimits, 15 MiB for a thousand aliased ones),
 * and their texts are the caller's choice. So only a caller already
 * authenticated, with the right to check, has a document compiled; a
 * document past the operation's check cap is never compiled; and the cache
 * is bounded by an estimate of the bytes its entries hold as well as by their
 * number (src/domain/lru-cache.ts).
 *
 * Everything else is Apollo's: documents that are not such queries, that do
 * not parse or validate (Apollo words those errors), and those past the check
 * cap with the variables sent.
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
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ParseOptions,
  type SelectionNode,
  type ValidationRule,
} from "graphql";
import { compileQuery, isCompiledQuery, type CompiledQuery } from "graphql-jit";
import { LruCache } from "../../domain/lru-cache.js";
import { MAX_BATCH, operationChecks } from "../operation-checks.js";
import { QueryMeasure } from "../query-limits.js";

/** A GraphQL request as it arrived over HTTP, its parts already of the right JSON types. */
export interface CheckRequest {
  query: string;
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
}

export interface CompiledChecksOptions {
  schema: GraphQLSchema;
  /** Apollo's parse options. */
  parseOptions: ParseOptions;
  /** The validation rules Apollo is given beside graphql's own (specifiedRules). */
  validationRules: readonly ValidationRule[];
  /** Distinct query texts kept compiled (or known not to be fast-path checks), least recently used dropped first. */
  capacity: number;
  /** What those may hold in all, in bytes as documentBytes estimates them; least recently used dropped first. */
  maxBytes: number;
}

const CHECK_FIELDS: ReadonlySet<string> = new Set(["checkLimits", "checkLimitsBatch"]);
/** A document without it is not a check: Apollo answers it, without the fast path parsing it first. */
const CHECK_FIELD_PREFIX = "checkLimits";
const MAX_OPERATION_NAMES = 16;
/** The fast path's operations select only checkLimits and checkLimitsBatch fields: no fragment is spread at their root. */
const NO_FRAGMENTS: Readonly<Record<string, FragmentDefinitionNode>> = Object.freeze({});

/**
 * Heap a compiled query holds: a fixed part, and a part per field selected
 * (fragments expanded where they are spread: graphql-jit generates code for
 * each). Measured with `npx tsx --expose-gc scripts/fast-path-memory.ts`
 * over documents from one checkLimits to a thousand aliased ones, with
 * fragments, nested lists and long literals: at most 9 KiB fixed and
 * 5.1 KiB per field (1.3 to 5.1). Per character of query text it ranged
 * from 1 byte (a long literal) to 4,800 (a fragment spread fifty times),
 * so the text's length alone cannot bound it; the fields can.
 */
const COMPILED_BYTES = 10 * 1024;
const COMPILED_BYTES_PER_FIELD = 6 * 1024;
/** Every kept text: the string (two bytes a character at most) and its entry, with its map of operations (a few hundred bytes). */
const TEXT_BYTES_PER_CHARACTER = 2;
const ENTRY_BYTES = 512;

export interface CompiledCheck {
  query: CompiledQuery;
  operation: OperationDefinitionNode;
  /** Estimated heap it holds (see COMPILED_BYTES). */
  bytes: number;
}

/** One query text's operations, by operation name (null: none given); a null operation is Apollo's to answer. */
type Operations = Map<string | null, CompiledCheck | null>;

export class CompiledChecks {
  /** By query text, so that finding one costs no new string per request. */
  private readonly documents: LruCache<string, Operations>;
  private readonly rules: readonly ValidationRule[];

  constructor(private readonly options: CompiledChecksOptions) {
    this.rules = [...specifiedRules, ...options.validationRules];
    this.documents = new LruCache({ maxEntries: options.capacity, maxWeight: options.maxBytes, weigh: documentBytes });
  }

  /** Query texts kept. */
  get size(): number {
    return this.documents.size;
  }

  /** The estimated bytes they hold. */
  get bytes(): number {
    return this.documents.weight;
  }

  /**
   * The request's operation compiled, compiling it on first sight; null when
   * Apollo must answer it. The caller is already authenticated and has the
   * right to check: no one else has anything compiled or kept.
   */
  find(request: CheckRequest): CompiledCheck | null {
    const compiled = this.compiled(request.query, request.operationName);
    // Past the cap with these variables: Apollo refuses it (operation-checks.ts words the refusal).
    if (compiled === null || operationChecks(compiled.operation, NO_FRAGMENTS, request.variables) > MAX_BATCH) return null;
    return compiled;
  }

  private compiled(query: string, operationName: string | undefined): CompiledCheck | null {
    if (!query.includes(CHECK_FIELD_PREFIX)) return null;
    const operations: Operations = this.documents.get(query) ?? new Map();
    const name = operationName ?? null;
    let compiled = operations.get(name);
    if (compiled === undefined) {
      // A text sent with ever new operation names must not grow without bound either.
      if (operations.size >= MAX_OPERATION_NAMES) operations.delete(operations.keys().next().value!);
      compiled = this.compile(query, operationName, this.options.maxBytes - documentBytes(query, operations));
      operations.set(name, compiled);
      // Kept again, weighed anew; the least recently used texts make room.
      this.documents.set(query, operations);
    }
    return compiled;
  }

  /** The compiled operation, or null when Apollo must answer it: not a check, invalid, past the check cap, or heavier than `room`. */
  private compile(query: string, operationName: string | undefined, room: number): CompiledCheck | null {
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
    // Past the cap with what is written in it (literal lists, variables' defaults): never compiled, Apollo refuses it.
    if (operationChecks(operation, NO_FRAGMENTS, undefined) > MAX_BATCH) return null;
    // Valid, so within MAX_QUERY_FIELDS: counting its fields again is exact, and as cheap as validating.
    const bytes = COMPILED_BYTES + COMPILED_BYTES_PER_FIELD * new QueryMeasure(document, Infinity, Infinity).operation(operation).fields;
    // What the cache could not keep would be compiled again for every request: Apollo answers it instead.
    if (bytes > room) return null;
    const compiled = compileQuery(this.options.schema, document, operationName);
    return isCompiledQuery(compiled) ? { query: compiled, operation, bytes } : null;
  }
}

/** The estimated heap a query text's entry holds: the text, the entry, and its compiled operations. */
function documentBytes(query: string, operations: Operations): number {
  let bytes = ENTRY_BYTES + TEXT_BYTES_PER_CHARACTER * query.length;
  for (const compiled of operations.values()) bytes += compiled?.bytes ?? 0;
  return bytes;
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
