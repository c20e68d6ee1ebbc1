import { ApolloServer } from "@apollo/server";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
  ApolloServerPluginSchemaReportingDisabled,
  ApolloServerPluginUsageReportingDisabled,
} from "@apollo/server/plugin/disabled";
import type { GraphQLSchema, ParseOptions, ValidationRule } from "graphql";
import type { ApiContext } from "../api/context.js";
import type { ErrorFormatter } from "../api/errors.js";
import { mutationLimit } from "../api/mutation-limit.js";
import { requestLogging } from "../api/request-logging.js";
import type { Logger } from "./logger.js";

export interface ApolloOptions {
  schema: GraphQLSchema;
  introspection: boolean;
  formatError: ErrorFormatter;
  /** Beside graphql's own (the query limits). */
  validationRules: ValidationRule[];
  parseOptions: ParseOptions;
  logger: Logger;
}

/** Apollo Server as the service runs it over HTTP, started: it answers every request the checks' fast path does not. */
export async function startApollo(options: ApolloOptions): Promise<ApolloServer<ApiContext>> {
  const apollo = new ApolloServer<ApiContext>({
    schema: options.schema,
    introspection: options.introspection,
    csrfPrevention: true,
    includeStacktraceInErrorResponses: false,
    formatError: options.formatError,
    // Apollo installs some plugins unless told not to. Each is off here, so that
    // no plugin of Apollo's own runs per request or per field: cache control (it hooks
    // every resolved field, and nothing here is cacheable: every check counts),
    // usage and schema reporting and inline traces (they would activate with an
    // Apollo key in the environment), and the landing page.
    plugins: [
      ApolloServerPluginCacheControlDisabled(),
      ApolloServerPluginUsageReportingDisabled(),
      ApolloServerPluginSchemaReportingDisabled(),
      ApolloServerPluginInlineTraceDisabled(),
      ApolloServerPluginLandingPageDisabled(),
      mutationLimit,
      requestLogging(options.logger),
    ],
    validationRules: options.validationRules,
    parseOptions: options.parseOptions,
    // Apollo's default pretty-prints every response (JSON.stringify(value, null, 2)).
    stringifyResult: (value) => JSON.stringify(value),
    // Parsed and validated documents are cached by Apollo's default document
    // store (keyed by the query's sha256), and automatic persisted queries are
    // on with its default in-memory cache: a client may send only the hash.
  });
  await apollo.start();
  return apollo;
}
