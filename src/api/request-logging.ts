import type { ApolloServerPlugin } from "@apollo/server";
import type { Logger } from "pino";
import type { ApiContext } from "./context.js";
import { logUnexpectedErrors } from "./fast-path/apollo-response.js";

/**
 * Log lines tied to a request by its id: every unexpected error (the caller
 * saw only INTERNAL_SERVER_ERROR, the log has the cause), and one audit line
 * per mutation naming the API key that made it. Checks log nothing: they are
 * the hot path, and metrics count them.
 */
export function requestLogging(logger: Logger): ApolloServerPlugin<ApiContext> {
  return {
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, contextValue }) {
          logUnexpectedErrors(logger, errors, contextValue.requestId);
        },
        async willSendResponse({ operation, operationName, contextValue, errors }) {
          if (operation?.operation !== "mutation") return;
          logger.info(
            { requestId: contextValue.requestId, keyId: contextValue.principal.keyId, operation: operationName ?? null, failed: (errors?.length ?? 0) > 0 },
            "mutation",
          );
        },
      };
    },
  };
}
