import type { ApolloServerPlugin } from "@apollo/server";
import type { ApiContext } from "./context.js";
import { toGraphQLError } from "./errors.js";

/**
 * Counts every mutation operation against the caller's admin limit before it
 * runs (one per root field), so every mutation, present or future, is covered
 * and queries pay nothing.
 */
export const mutationRateLimit: ApolloServerPlugin<ApiContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ operation, contextValue }) {
        if (operation?.operation !== "mutation") return;
        try {
          await contextValue.services.mutations.admit(contextValue.principal, operation.selectionSet.selections.length);
        } catch (error) {
          throw toGraphQLError(error) ?? error;
        }
      },
    };
  },
};
