/**
 * floodgate/client: `new FloodgateClient({ url, token })` and
 * `await client.check(request)`. Importing it loads none of the server's
 * modules or dependencies (test/client/isolation.test.ts), only the client,
 * graphql-ws for its push channel, and in Node undici and ws.
 */

export { FloodgateClient, FloodgateError, type ClientStats, type FailureMode, type FloodgateClientOptions } from "./client.js";
export type { ClientDecisionSource, FloodgateDecision, HttpHeader } from "./decision.js";
export type { CheckLimitsInput as CheckRequest, ClientRuleFragment as DecisionRule } from "./generated/operations.js";
export type { FetchFunction } from "./transport.js";
