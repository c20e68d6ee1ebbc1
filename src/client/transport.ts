/**
 * How the client reaches Floodgate: one POST of a JSON body to the GraphQL
 * endpoint, answered with a status and a text. The deadline is the caller's
 * AbortSignal; a transport only has to honour it.
 */

export interface TransportAnswer {
  status: number;
  text: string;
}

export interface Transport {
  post(body: string, signal: AbortSignal): Promise<TransportAnswer>;
  close(): Promise<void>;
}

export interface TransportOptions {
  /** The GraphQL endpoint, e.g. http://localhost:4000/graphql. */
  url: URL;
  /** The Authorization header's value. */
  authorization: string;
  /** At most this many connections to Floodgate (where the transport pools them). */
  connections: number;
}

/** The fetch function of the runtime, or one given by the caller. */
export type FetchFunction = (input: string, init: { method: string; headers: Record<string, string>; body: string; signal: AbortSignal }) => Promise<{
  status: number;
  text(): Promise<string>;
}>;

/**
 * Over a fetch function: what edge runtimes (Cloudflare Workers, Vercel
 * Edge, Deno, Bun) have. In Node a Pool of undici is about five times as
 * fast (see platform/node.ts), so Node uses this only when given a fetch.
 */
export function fetchTransport(fetch: FetchFunction, { url, authorization }: TransportOptions): Transport {
  const headers = { "content-type": "application/json", authorization };
  const href = url.href;
  return {
    async post(body, signal) {
      const response = await fetch(href, { method: "POST", headers, body, signal });
      return { status: response.status, text: await response.text() };
    },
    close: async () => {},
  };
}
