import type { ApolloServerPlugin } from "@apollo/server";
import { Kind, type FragmentDefinitionNode, type SelectionSetNode } from "graphql";
import type { ApiContext } from "./context.js";
import { toGraphQLError } from "./errors.js";

/**
 * Every mutation counts against the caller's admin limit before it runs, one
 * per root field (fragments at the root counted too), so every mutation,
 * present or future, is covered and queries pay nothing. (Subscriptions never
 * reach Apollo: the HTTP layer refuses them.) releaseLease alone is not
 * counted: it ends a check (a CONCURRENCY lease), as often as checks come,
 * and changes nothing but that check's own slots.
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
          const counted = rootFields(operation.selectionSet, fragments, new Set());
          if (counted > 0) await contextValue.services.mutations.admit(contextValue.principal, counted);
        } catch (error) {
          throw toGraphQLError(error) ?? error;
        }
      },
    };
  },
};

const UNCOUNTED_FIELDS: ReadonlySet<string> = new Set(["releaseLease"]);

/** The root fields a selection set runs, with fragments spread in (a fragment cycle is refused by validation before this). */
function rootFields(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, spreading: Set<string>): number {
  let count = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) count += UNCOUNTED_FIELDS.has(selection.name.value) ? 0 : 1;
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
