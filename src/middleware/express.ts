/**
 * floodgate/express: an Express (or Connect, or node:http) middleware.
 *
 *   app.use(floodgate({ url, token, tenant: "acme", skip: ["/healthz"] }));
 *
 * Every checked response carries the decision's headers; a denial is answered
 * here (429, or 403 for a deny-listed request; problem details); THROTTLE holds the request for its delay; a
 * caller's fault the client reports (bad token, say) goes to next(error).
 * A CONCURRENCY lease is released when the response finishes or its
 * connection closes; a request whose caller left while it was checked or
 * held is not routed.
 * See gate.ts for how a request becomes a check.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { createGate, releaseWhenDone, type Gate, type MiddlewareOptions, type RequestView } from "./gate.js";

export type ExpressMiddleware = ((request: IncomingMessage, response: ServerResponse, next: (error?: unknown) => void) => void) & {
  /** The gate, whose client stats() can be read; close() closes a client the middleware made. */
  readonly gate: Gate<IncomingMessage>;
};

/** Every express.Router, and the app's own routes, unless told otherwise: see GateOptions.ignorePathCase. */
const ROUTERS_IGNORE_CASE = true;

export function floodgate(options: MiddlewareOptions<IncomingMessage>): ExpressMiddleware {
  const gate = createGate<IncomingMessage>(options, nodeRequestView, ROUTERS_IGNORE_CASE);
  const middleware = (request: IncomingMessage, response: ServerResponse, next: (error?: unknown) => void) => {
    gate.decide(request).then((verdict) => {
      // Answered while the check was pending (a request-timeout middleware in front, say), or its caller gone:
      // the response is no longer this middleware's nor the request the routes'. Setting a header would throw
      // where nothing catches it, an unhandled rejection that ends the process; routing it would do the work
      // for nobody. A lease is handed back now, its response's end long past.
      if (response.headersSent || response.closed) {
        if (verdict.kind === "pass") void gate.release(verdict.decision);
        return;
      }
      if (verdict.kind === "skip") return next();
      for (const { name, value } of verdict.headers) response.setHeader(name, value);
      releaseWhenDone(gate, verdict, response);
      if (verdict.kind === "deny") {
        response.statusCode = verdict.status;
        response.end(verdict.body);
      } else if (verdict.delayMs > 0) {
        // The same after THROTTLE's delay: a response sent meanwhile is not routed again, nor a request whose
        // caller left (the delay holds back its work; doing it for nobody would do it twice when the caller retries).
        setTimeout(() => (response.headersSent || response.closed ? undefined : next()), verdict.delayMs);
      } else {
        next();
      }
    }, next);
  };
  return Object.assign(middleware, { gate });
}

/** node:http's request as the gate reads it (Express's request is one). */
export function nodeRequestView(request: IncomingMessage & { originalUrl?: string }): RequestView {
  return {
    method: request.method ?? "GET",
    // Express's originalUrl: under app.use("/api", floodgate(...)) its url has lost the mount ("/orders" for "/api/orders").
    url: request.originalUrl ?? request.url ?? "/",
    header: (name) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value.join(", ") : value;
    },
    remoteAddress: request.socket.remoteAddress,
  };
}
