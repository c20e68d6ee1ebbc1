/**
 * Validation rules that refuse expensive documents before anything runs:
 * nesting deeper than `maxDepth`, and more than `maxFields` field selections
 * in all (fragments counted where they are spread, so aliases and repeated
 * fragments cannot hide their cost). A thousand aliased checkLimits is
 * refused; a checkLimitsBatch of a thousand checks is one field.
 *
 * Measuring must itself be cheap, whatever the document: a kilobyte of
 * fragments that each spread the next one ten times selects 10^12 fields.
 * Walking every fragment again at every spread took that many steps (one
 * such request blocked the process for hours). So each fragment is measured
 * once, where it is defined, and a spread adds its measure (fragments form
 * a tree without cycles: a cycle is refused by graphql's NoFragmentCycles);
 * the work is one visit per selection written in the document at most, and
 * the walk stops as soon as a limit is passed.
 *
 * Standard introspection is measured apart: graphql-js's own
 * getIntrospectionQuery() nests 15 levels (its TypeRef fragment follows
 * `ofType` nine times), deeper than the default limit, and GraphiQL, Apollo
 * Sandbox, Altair and code generators all send it. A root `__schema` or
 * `__type` field may be as deep as that query is (with every option it has),
 * and no deeper; every other field keeps `maxDepth`, so a deep document
 * cannot borrow the allowance, and the field limit counts both alike.
 */

import {
  getIntrospectionQuery,
  GraphQLError,
  Kind,
  parse,
  type ASTVisitor,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";

/** Levels of fields nested, and field selections in all; once past a limit, only as much as was counted before stopping. */
export interface QueryCost {
  depth: number;
  fields: number;
}

/** An operation's cost, its standard introspection measured apart from its other fields. */
export interface OperationCost extends QueryCost {
  /** Levels of the deepest root `__schema` or `__type` field; `depth` counts the other fields only. */
  introspectionDepth: number;
}

/** The root fields of standard introspection (the spec's `__schema` and `__type`). */
const INTROSPECTION_FIELDS = new Set(["__schema", "__type"]);

export function queryLimits(maxDepth: number, maxFields: number): ValidationRule {
  const introspectionLimit = Math.max(maxDepth, STANDARD_INTROSPECTION_DEPTH);
  return (context: ValidationContext): ASTVisitor => {
    const measure = new QueryMeasure(context.getDocument(), maxDepth, maxFields, introspectionLimit);
    return {
      OperationDefinition(operation) {
        const { depth, introspectionDepth, fields } = measure.operation(operation);
        if (depth > maxDepth) {
          context.reportError(new GraphQLError(`the query is more than ${maxDepth} levels deep; at most ${maxDepth} are allowed`, { nodes: [operation] }));
        }
        if (introspectionDepth > introspectionLimit) {
          context.reportError(
            new GraphQLError(`the introspection is more than ${introspectionLimit} levels deep; at most ${introspectionLimit} are allowed (as deep as graphql-js's getIntrospectionQuery())`, {
              nodes: [operation],
            }),
          );
        }
        if (fields > maxFields) {
          context.reportError(
            new GraphQLError(`the query selects more than ${maxFields} fields in all; at most ${maxFields} are allowed (use checkLimitsBatch for many checks)`, {
              nodes: [operation],
            }),
          );
        }
      },
    };
  };
}

/** What a fragment spread counts while that fragment is being measured (a cycle), or when no such fragment is defined: graphql's own rules report both. */
const NOTHING: QueryCost = Object.freeze({ depth: 0, fields: 0 });

/** The cost of a document's operations, each fragment measured once for all of them. */
export class QueryMeasure {
  private readonly fragments = new Map<string, FragmentDefinitionNode>();
  private readonly fragmentCosts = new Map<string, QueryCost>();
  /** How deep any walk goes before it stops: past this, no field can pass either limit. */
  private readonly walkDepth: number;

  constructor(
    document: DocumentNode,
    private readonly maxDepth: number,
    private readonly maxFields: number,
    private readonly introspectionLimit: number = maxDepth,
  ) {
    this.walkDepth = Math.max(maxDepth, introspectionLimit);
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(definition.name.value, definition);
    }
  }

  /** Root `__schema` and `__type` fields count towards `introspectionDepth`, every other root selection (fragments included) towards `depth`. */
  operation(operation: OperationDefinitionNode): OperationCost {
    let depth = 0;
    let introspectionDepth = 0;
    let fields = 0;
    for (const selection of operation.selectionSet.selections) {
      const inner = this.selection(selection, 0);
      if (selection.kind === Kind.FIELD && INTROSPECTION_FIELDS.has(selection.name.value)) introspectionDepth = Math.max(introspectionDepth, inner.depth);
      else depth = Math.max(depth, inner.depth);
      fields += inner.fields;
      if (depth > this.maxDepth || introspectionDepth > this.introspectionLimit || fields > this.maxFields) break;
    }
    return { depth, introspectionDepth, fields };
  }

  /**
   * The cost of a selection set whose fields sit `level` levels below the
   * operation (a fragment is measured from its own top, level 0, and placed
   * where it is spread). Stops once past a limit: the cost is then only as
   * much as was counted, which is enough to refuse.
   */
  private selectionSet(set: SelectionSetNode, level: number): QueryCost {
    let depth = 0;
    let fields = 0;
    for (const selection of set.selections) {
      const inner = this.selection(selection, level);
      depth = Math.max(depth, inner.depth);
      fields += inner.fields;
      if (level + depth > this.walkDepth || fields > this.maxFields) break;
    }
    return { depth, fields };
  }

  private selection(selection: SelectionNode, level: number): QueryCost {
    if (selection.kind === Kind.FIELD) {
      // A field at this level is already past the depth limit: what lies below it cannot change the verdict.
      const below = selection.selectionSet === undefined || level >= this.walkDepth ? NOTHING : this.selectionSet(selection.selectionSet, level + 1);
      return { depth: below.depth + 1, fields: below.fields + 1 };
    }
    if (selection.kind === Kind.INLINE_FRAGMENT) return this.selectionSet(selection.selectionSet, level);
    return this.fragment(selection.name.value);
  }

  private fragment(name: string): QueryCost {
    const known = this.fragmentCosts.get(name);
    if (known !== undefined) return known;
    const fragment = this.fragments.get(name);
    if (fragment === undefined) return NOTHING;
    this.fragmentCosts.set(name, NOTHING);
    const cost = this.selectionSet(fragment.selectionSet, 0);
    this.fragmentCosts.set(name, cost);
    return cost;
  }
}

/** How deep graphql-js's standard introspection query is, with every option it offers at its default type depth. */
function standardIntrospectionDepth(): number {
  const document = parse(
    getIntrospectionQuery({
      descriptions: true,
      specifiedByUrl: true,
      directiveIsRepeatable: true,
      schemaDescription: true,
      inputValueDeprecation: true,
      experimentalDirectiveDeprecation: true,
      oneOf: true,
    }),
  );
  const operation = document.definitions.find((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION)!;
  return new QueryMeasure(document, Infinity, Infinity).operation(operation).introspectionDepth;
}

export const STANDARD_INTROSPECTION_DEPTH = standardIntrospectionDepth();
