import type { ApolloServerPlugin } from "@apollo/server";
import { Kind, type FragmentDefinitionNode, type SelectionSetNode } from "graphql";
import type { ApiContext } from "./context.js";
import { toGraphQLError } from "./errors.js";

/**
 * Every mutation counts against the caller's admin limit before it runs, one
 * per root field (fragments at the root counted too), so every mutation,
 * present or future, is covered and queries pay nothing. (Subscriptions never
 * reach Apollo: the HTTP layer refuses them.)
 */
export const mutationLimit: ApolloServerPlugin<ApiContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ operation, document, contextValue }) {
        if (operation?.operation !== "mutation") return;
        const fragments = new Map(
          document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]),
        );
        try {
          await contextValue.services.mutations.admit(contextValue.principal, rootFields(operation.selectionSet, fragments, new Set()));
        } catch (error) {
          throw toGraphQLError(error) ?? error;
        }
      },
    };
  },
};

/** The root fields a selection set runs, with fragments spread in (a fragment cycle is refused by validation before this). */
function rootFields(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, spreading: Set<string>): number {
  let count = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) count++;
    else if (selection.kind === Kind.INLINE_FRAGMENT) count += rootFields(selection.selectionSet, fragments, spreading);
    else {
      const fragment = fragments.get(selection.name.value);
      if (fragment === undefined || spreading.has(fragment.name.value)) continue;
      spreading.add(fragment.name.value);
      count += rootFields(fragment.selectionSet, fragments, spreading);
      spreading.delete(fragment.name.value);
    }
  }
  return count;
}
