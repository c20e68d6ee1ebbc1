/**
 * What the client uses in Node (package.json "imports" maps #floodgate-platform
 * here under the "node" condition): an undici Pool, keep-alive and without
 * pipelining, which made about 14k requests/s where Node 20's global fetch
 * made 2.7k (docs: ENVIRONMENT.md), and `ws` for the push channel where the
 * runtime has no WebSocket of its own (Node 20), never without a listener for
 * its errors (HeardWebSocket). Node also has what LOCAL
 * needs (node:crypto and node:net, through the domain's request parsing and
 * bucket keys).
 *
 * A request is dispatched with a handler of its own (ResponseText) rather
 * than through pool.request: no response stream, no AbortSignal and its
 * listeners, the body's chunks joined once. Side by side on the client's
 * batch of 16 checks, 86 µs of the client's CPU a request against 135
 * (BENCHMARKS.md, the client).
 */

import { Pool, type Dispatcher } from "undici";
import WebSocket from "ws";
import { LocalLimiter } from "../local-limiter.js";
import { DeadlineExceeded, monotonicMs, type Transport, type TransportAnswer, type TransportOptions } from "../transport.js";
import type { Platform } from "./types.js";

function poolTransport({ url, authorization, connections }: TransportOptions): Transport {
  const pool = new Pool(url.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const path = `${url.pathname}${url.search}`;
  const headers = { "content-type": "application/json", authorization };
  /** Requests whose callers still wait for an answer (each until its deadline at most). */
  const unsettled = new Set<Promise<TransportAnswer>>();
  return {
    post: (body, deadlineAtMs) => {
      const answer = new Promise<TransportAnswer>((resolve, reject) => {
        pool.dispatch({ path, method: "POST", headers, body }, new ResponseText(deadlineAtMs, resolve, reject));
      });
      unsettled.add(answer);
      const settled = () => void unsettled.delete(answer);
      answer.then(settled, settled);
      return answer;
    },
    // Once every caller has its answer, what the pool still holds was given up at its deadline: a request queued
    // behind a connection that hangs, which pool.close() waited for until undici's connect timeout (10 s).
    close: async () => {
      await Promise.allSettled([...unsettled]);
      await pool.destroy();
    },
  };
}

/**
 * One request's handler: collects the response's text, and gives the request
 * up at the deadline. A request still queued for a connection at its deadline
 * is settled then, and aborted as soon as undici hands it a connection.
 */
class ResponseText implements Dispatcher.DispatchHandlers {
  private status = 0;
  private readonly chunks: Buffer[] = [];
  private abort: ((reason: Error) => void) | null = null;
  private expired = false;
  private readonly timer: ReturnType<typeof setTimeout>;

  constructor(
    deadlineAtMs: number,
    private readonly resolve: (answer: TransportAnswer) => void,
    private readonly reject: (error: Error) => void,
  ) {
    this.timer = setTimeout(() => this.expire(), Math.max(0, deadlineAtMs - monotonicMs()));
  }

  onConnect(abort: (reason: Error) => void): void {
    this.abort = abort;
    if (this.expired) abort(new DeadlineExceeded());
  }

  onHeaders(statusCode: number): boolean {
    // 1xx (100 Continue and the like): informational, the answer's own status comes next.
    if (statusCode >= 200) this.status = statusCode;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    clearTimeout(this.timer);
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.resolve({ status: this.status, text: body.toString("utf8") });
  }

  onError(error: Error): void {
    clearTimeout(this.timer);
    this.reject(this.expired ? new DeadlineExceeded() : error);
  }

  private expire(): void {
    this.expired = true;
    this.reject(new DeadlineExceeded());
    this.abort?.(new DeadlineExceeded());
  }
}

/**
 * ws's WebSocket, always heard when it fails. The push channel abandons a
 * connection not yet acknowledged (graphql-ws's terminate, at close() and at
 * its connect timeout), and graphql-ws lets go of the socket's error handler
 * as it does: ws then emits "closed before the connection was established"
 * to no one, which an EventEmitter throws, taking the caller's process down.
 * The close that follows is what the channel acts on; the error is nothing
 * it needs. (A runtime's own WebSocket is an EventTarget: an error nobody
 * listens to is dropped.)
 */
class HeardWebSocket extends WebSocket {
  constructor(url: string, protocols?: string | string[]) {
    super(url, protocols);
    this.on("error", () => undefined);
  }
}

export const platform: Platform = {
  transport: poolTransport,
  WebSocket: (globalThis.WebSocket as Platform["WebSocket"] | undefined) ?? (HeardWebSocket as unknown as Platform["WebSocket"]),
  LocalLimiter,
};
