/** A minimal typed GraphQL client over fetch, for the tests and the scripts: it returns data and errors as the server sent them. */

import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print, type GraphQLFormattedError } from "graphql";

export interface GraphQLResponse<T> {
  status: number;
  data: T | null | undefined;
  errors: GraphQLFormattedError[] | undefined;
}

export class GraphQLClient {
  constructor(
    readonly url: string,
    private readonly token?: string,
  ) {}

  async request<T, V>(document: TypedDocumentNode<T, V>, variables: V): Promise<GraphQLResponse<T>> {
    return this.raw<T>({ query: print(document), variables });
  }

  /** Sends any body (for malformed-request tests). */
  async raw<T = unknown>(body: unknown, headers: Record<string, string> = {}): Promise<GraphQLResponse<T>> {
    const response = await fetch(this.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...headers,
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const json = (await response.json()) as { data?: T | null; errors?: GraphQLFormattedError[] };
    return { status: response.status, data: json.data, errors: json.errors };
  }

  /** The data, or a thrown error carrying the GraphQL errors: for steps that must succeed. */
  async data<T, V>(document: TypedDocumentNode<T, V>, variables: V): Promise<T> {
    const { data, errors } = await this.request(document, variables);
    if (errors?.length || !data) throw new Error(`GraphQL errors: ${JSON.stringify(errors)}`);
    return data;
  }
}
