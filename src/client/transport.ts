/**
 * How the client reaches Floodgate: one POST of a JSON body to the GraphQL
 * endpoint, answered with a status and a text, under a deadline. The
 * transport owns the deadline because how a request is given up is its own
 * business: fetch needs an AbortSignal, while Node's transport aborts through
 * undici's handler and needs no AbortController (making one per request was
 * about 3% of the client's busy time under the bench's load).
 */

export interface TransportAnswer {
  status: number;
  text: string;
}

export interface Transport {
  /**
   * Floodgate's answer; rejects with DeadlineExceeded once `deadlineAtMs`
   * (a monotonicMs() time) passes without one, the request then given up, and
   * with any other error when Floodgate could not be reached or cut the
   * connection.
   */
  post(body: string, deadlineAtMs: number): Promise<TransportAnswer>;
  close(): Promise<void>;
}

/**
 * Milliseconds on a clock that only moves forward (performance.now's), which
 * deadlines are set on: Date.now() is stepped by NTP or a resumed VM, and a
 * wall clock set back an hour while a check waited to be sent gave its
 * request an hour-long deadline.
 */
export const monotonicMs = (): number => performance.now();

/** The deadline passed before Floodgate answered. */
export class DeadlineExceeded extends Error {
  constructor() {
    super("Floodgate did not answer before the deadline");
    this.name = "DeadlineExceeded";
  }
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
    post(body, deadlineAtMs) {
      const abort = new AbortController();
      let timer: ReturnType<typeof setTimeout> | undefined;
      // Settled at the deadline whatever the fetch does: one that does not heed its signal (a wrapper that drops
      // it, a body read that ignores it) left the check waiting for good.
      const expired = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new DeadlineExceeded());
          abort.abort();
        }, Math.max(0, deadlineAtMs - monotonicMs()));
      });
      const answered = (async () => {
        try {
          const response = await fetch(href, { method: "POST", headers, body, signal: abort.signal });
          return { status: response.status, text: await response.text() };
        } catch (error) {
          throw abort.signal.aborted ? new DeadlineExceeded() : error;
        }
      })();
      // The loser's rejection is nobody's to hear.
      answered.catch(() => undefined);
      expired.catch(() => undefined);
      return Promise.race([answered, expired]).finally(() => clearTimeout(timer));
    },
    close: async () => {},
  };
}
