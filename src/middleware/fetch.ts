/**
 * floodgate/fetch: a Web-standard handler for Hono, Next.js middleware and
 * other fetch runtimes: `(Request) => Promise<Response | undefined>`, the 429 (or 403)
 * response on a denial, undefined to go on (after THROTTLE's delay).
 *
 *   const limit = floodgate({ url, token, tenant: "acme" });
 *   app.use(async (c, next) => {                      // Hono
 *     const denied = await limit(c.req.raw);
 *     if (denied) return denied;
 *     await next();
 *     c.res = limit.withHeaders(c.req.raw, c.res);    // the decision's headers on allowed responses too
 *   });
 *
 * A request whose caller left while it was checked or held (its signal
 * aborted) is answered 499, which nobody reads, so that its route does not
 * run, when it holds a CONCURRENCY slot or waits THROTTLE's delay. On
 * @hono/node-server, whose Request has no signal until one is read (and
 * aborts only a signal that exists when the connection closes), a caller
 * that left during the check itself goes unnoticed: reading every request's
 * signal would build every Request whole.
 *
 * A request admitted by CONCURRENCY rules holds a lease until its response
 * has been sent. withHeaders hands the lease back by itself: the response it
 * returns releases it when its body has been read to the end or cancelled
 * (at once when it has none, answers a HEAD request or is a network error,
 * Response.error(), which it hands back as it is). A handler that
 * does not pass its response through withHeaders calls
 * limit.release(request) when it is done.
 *
 * Fetch runtimes do not tell a Request's peer address: pass it as the second
 * argument where the runtime has it, or read it with extract.ip (a
 * platform's header, such as CF-Connecting-IP), or, behind proxies that
 * append X-Forwarded-For (Vercel's, say), set trustProxy to their number: the
 * walk then starts at the header's end. See gate.ts for the rest.
 */

import type { HttpHeader } from "../client/index.js";
import type { FloodgateDecision } from "../client/index.js";
import { createGate, type Gate, type MiddlewareOptions } from "./gate.js";

export type FetchLimiter = ((request: Request, connection?: { remoteAddress?: string }) => Promise<Response | undefined>) & {
  /** The response with the headers of the decision made for this request (a copy when its headers cannot change), releasing its lease once its body is sent. */
  withHeaders(request: Request, response: Response): Response;
  /** Releases the lease of the decision made for this request, if it holds one (once; never rejects). */
  release(request: Request): Promise<void>;
  readonly gate: Gate<Request>;
};

/** Waits THROTTLE's delay: true once it has passed, false as soon as the caller leaves (the request's signal aborts). */
function heldFor(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const left = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", left);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", left, { once: true });
  });
}

/**
 * The answer to a request whose caller left while it was checked or held:
 * 499, nginx's "client closed request", which nobody reads. Returned, it
 * keeps the route from running: THROTTLE's delay holds back its work, and
 * doing it for nobody would do it twice when the caller retries.
 */
function callerLeft(): Response {
  return new Response(null, { status: 499 });
}

export function floodgate(options: MiddlewareOptions<Request>): FetchLimiter {
  const peers = new WeakMap<Request, string>();
  const passed = new WeakMap<Request, HttpHeader[]>();
  const leased = new WeakMap<Request, FloodgateDecision>();
  const gate = createGate<Request>(options, (request) => ({
    method: request.method,
    url: request.url,
    header: (name) => request.headers.get(name) ?? undefined,
    remoteAddress: peers.get(request),
  }));
  const limit = async (request: Request, connection?: { remoteAddress?: string }): Promise<Response | undefined> => {
    if (connection?.remoteAddress !== undefined) peers.set(request, connection.remoteAddress);
    const verdict = await gate.decide(request);
    if (verdict.kind === "skip") return undefined;
    if (verdict.kind === "deny") return new Response(verdict.body, { status: verdict.status, headers: verdict.headers.map(({ name, value }) => [name, value]) });
    // The signal only where a caller's leaving costs something (a slot held, a delay's held-back work): on
    // @hono/node-server, reading it builds the whole Request, which cut a bare app to 0.27x-0.48x its requests/s.
    if (verdict.decision.lease || verdict.delayMs > 0) {
      const { signal } = request;
      if (signal.aborted || (verdict.delayMs > 0 && !(await heldFor(verdict.delayMs, signal)))) {
        void gate.release(verdict.decision);
        return callerLeft();
      }
    }
    passed.set(request, verdict.headers);
    if (verdict.decision.lease) leased.set(request, verdict.decision);
    return undefined;
  };
  const release = (request: Request): Promise<void> => {
    const decision = leased.get(request);
    if (decision === undefined) return Promise.resolve();
    leased.delete(request);
    return gate.release(decision);
  };
  const withHeaders = (request: Request, response: Response): Response => {
    const headers = passed.get(request) ?? [];
    const holdsLease = leased.has(request);
    if (headers.length === 0 && !holdsLease) return response;
    // A network error (Response.error(), status 0) is no HTTP response: nothing to set headers on, nothing to
    // copy (a Response of status 0 cannot be made), and no body to wait for.
    if (response.type === "error") {
      void release(request);
      return response;
    }
    // A HEAD response's body is never sent: Hono drops it unread (new Response(null, the GET route's response)).
    const bodySent = response.body !== null && request.method !== "HEAD";
    if (holdsLease && !bodySent) void release(request);
    const body = holdsLease && bodySent ? releasingAtEnd(response.body!, () => void release(request)) : response.body;
    const target = new Response(body, response);
    for (const { name, value } of headers) target.headers.set(name, value);
    return target;
  };
  return Object.assign(limit, { withHeaders, release, gate });
}

/** The body as it was, calling `done` once it has been read to its end, failed or been cancelled. */
function releasingAtEnd(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done: ended, value } = await reader.read();
        if (!ended) return controller.enqueue(value);
        controller.close();
        done();
      } catch (error) {
        done();
        controller.error(error);
      }
    },
    cancel(reason) {
      done();
      return reader.cancel(reason);
    },
  });
}
