/** The answers the server writes itself, outside GraphQL execution: JSON bodies, and errors shaped as GraphQL's. */

import type { ServerResponse } from "node:http";

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

/** A refusal of the whole request, in the shape a GraphQL client reads. */
export function graphqlErrorBody(message: string, code: string) {
  return { errors: [{ message, extensions: { code } }] };
}
