/**
 * Validation rules that refuse expensive documents before anything runs:
 * nesting deeper than `maxDepth`, and more than `maxFields` field selections
 * in all (fragments counted where they are spread, so aliases and repeated
 * fragments cannot hide their cost). A thousand aliased checkLimits is
 * refused; a checkLimitsBatch of a thousand checks is one field.
 */

import {
  GraphQLError,
  Kind,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";

export function queryLimits(maxDepth: number, maxFields: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(operation) {
      const fragments = new Map(context.getDocument().definitions.filter(isFragment).map((f) => [f.name.value, f]));
      const { depth, fields } = measure(operation.selectionSet, fragments, new Set());
      if (depth > maxDepth) {
        context.reportError(new GraphQLError(`the query is ${depth} levels deep; at most ${maxDepth} are allowed`, { nodes: [operation] }));
      }
      if (fields > maxFields) {
        context.reportError(
          new GraphQLError(`the query selects ${fields} fields in all; at most ${maxFields} are allowed (use checkLimitsBatch for many checks)`, {
            nodes: [operation],
          }),
        );
      }
    },
  });
}

function isFragment(node: { kind: Kind }): node is FragmentDefinitionNode {
  return node.kind === Kind.FRAGMENT_DEFINITION;
}

function measure(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, spreading: Set<string>): { depth: number; fields: number } {
  let depth = 0;
  let fields = 0;
  for (const selection of set.selections) {
    let inner: { depth: number; fields: number } = { depth: 0, fields: 0 };
    if (selection.kind === Kind.FIELD) {
      if (selection.selectionSet) inner = measure(selection.selectionSet, fragments, spreading);
      depth = Math.max(depth, inner.depth + 1);
      fields += inner.fields + 1;
      continue;
    }
    if (selection.kind === Kind.INLINE_FRAGMENT) {
      inner = measure(selection.selectionSet, fragments, spreading);
    } else {
      const fragment = fragments.get(selection.name.value);
      // A cycle is reported by graphql's own NoFragmentCycles rule; here it only must not loop.
      if (fragment === undefined || spreading.has(fragment.name.value)) continue;
      spreading.add(fragment.name.value);
      inner = measure(fragment.selectionSet, fragments, spreading);
      spreading.delete(fragment.name.value);
    }
    depth = Math.max(depth, inner.depth);
    fields += inner.fields;
  }
  return { depth, fields };
}
