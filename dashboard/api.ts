/**
 * Floodgate's GraphQL API from the page: queries and mutations over HTTP to
 * this origin's /graphql, subscriptions over graphql-ws on the same path, each
 * carrying the signed-in key. An error keeps what the API said of it: its
 * code, and for validation errors the field at fault, so that forms show it
 * next to that field.
 */

import { createClient, type Client } from "graphql-ws";
import type { TypedDocumentString } from "./generated/operations.js";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    /** The argument at fault, as the API names it ("input.limit"), for BAD_USER_INPUT. */
    readonly field: string | null = null,
  ) {
    super(message);
  }
}

interface GraphQLErrorBody {
  message: string;
  extensions?: { code?: string; field?: string };
}

export class Api {
  private socket: Client | null = null;

  constructor(private readonly token: string) {}

  async request<R, V>(document: TypedDocumentString<R, V>, variables: V): Promise<R> {
    let response: Response;
    try {
      response = await fetch("/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${this.token}` },
        body: JSON.stringify({ query: document.toString(), variables }),
      });
    } catch {
      throw new ApiError("Floodgate cannot be reached: check the network, or whether it is running.", "NETWORK");
    }
    const body = (await response.json().catch(() => ({}))) as { data?: R | null; errors?: GraphQLErrorBody[] };
    const error = body.errors?.[0];
    if (error) throw new ApiError(error.message, error.extensions?.code ?? "INTERNAL_SERVER_ERROR", error.extensions?.field ?? null);
    if (!response.ok || !body.data) throw new ApiError(`Floodgate answered HTTP ${response.status}.`, "HTTP");
    return body.data;
  }

  /** Calls `next` with every result until the returned function is called; `fail` with an error that ends the subscription. */
  subscribe<R, V>(document: TypedDocumentString<R, V>, variables: V, next: (data: R) => void, fail: (error: ApiError) => void): () => void {
    return this.client().subscribe<R>(
      { query: document.toString(), variables: variables as Record<string, unknown> },
      {
        next: ({ data, errors }) => {
          const error = (errors as GraphQLErrorBody[] | undefined)?.[0];
          if (error) fail(new ApiError(error.message, error.extensions?.code ?? "INTERNAL_SERVER_ERROR"));
          else if (data) next(data);
        },
        error: (error) => fail(socketError(error)),
        complete: () => undefined,
      },
    );
  }

  close(): void {
    void this.socket?.dispose();
    this.socket = null;
  }

  private client(): Client {
    this.socket ??= createClient({
      url: `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/graphql`,
      connectionParams: { authorization: `Bearer ${this.token}` },
      retryAttempts: Infinity,
      // A closed socket is tried again, except when the key is refused (4403): that will not mend itself.
      shouldRetry: (event) => !(event instanceof CloseEvent && event.code === 4403),
      lazy: true,
    });
    return this.socket;
  }
}

function socketError(error: unknown): ApiError {
  if (error instanceof CloseEvent) {
    return error.code === 4403 ? new ApiError("The live stream was closed: this API key is not (or no longer) valid.", "UNAUTHENTICATED") : new ApiError(`The live stream closed (${error.code}).`, "NETWORK");
  }
  const first = Array.isArray(error) ? (error[0] as GraphQLErrorBody | undefined) : undefined;
  if (first) return new ApiError(first.message, first.extensions?.code ?? "INTERNAL_SERVER_ERROR");
  return new ApiError("The live stream failed.", "NETWORK");
}
