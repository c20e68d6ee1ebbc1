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
 */

import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";

/** Levels of fields nested, and field selections in all; once past a limit, only as much as was counted before stopping. */
export interface QueryCost {
  depth: number;
  fields: number;
}

export function queryLimits(maxDepth: number, maxFields: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const measure = new QueryMeasure(context.getDocument(), maxDepth, maxFields);
    return {
      OperationDefinition(operation) {
        const { depth, fields } = measure.operation(operation);
        if (depth > maxDepth) {
          context.reportError(new GraphQLError(`the query is more than ${maxDepth} levels deep; at most ${maxDepth} are allowed`, { nodes: [operation] }));
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

  constructor(
    document: DocumentNode,
    private readonly maxDepth: number,
    private readonly maxFields: number,
  ) {
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(definition.name.value, definition);
    }
  }

  operation(operation: OperationDefinitionNode): QueryCost {
    return this.selectionSet(operation.selectionSet, 0);
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
      let inner: QueryCost;
      if (selection.kind === Kind.FIELD) {
        // A field at this level is already past the depth limit: what lies below it cannot change the verdict.
        const below = selection.selectionSet === undefined || level >= this.maxDepth ? NOTHING : this.selectionSet(selection.selectionSet, level + 1);
        inner = { depth: below.depth + 1, fields: below.fields + 1 };
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        inner = this.selectionSet(selection.selectionSet, level);
      } else {
        inner = this.fragment(selection.name.value);
      }
      depth = Math.max(depth, inner.depth);
      fields += inner.fields;
      if (level + depth > this.maxDepth || fields > this.maxFields) break;
    }
    return { depth, fields };
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
