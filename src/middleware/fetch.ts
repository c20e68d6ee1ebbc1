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
 * Fetch runtimes do not tell a Request's peer address: pass it as the second
 * argument where the runtime has it, or read it with extract.ip (a
 * platform's header, such as CF-Connecting-IP). See gate.ts for the rest.
 */

import type { HttpHeader } from "../client/index.js";
import { createGate, type Gate, type MiddlewareOptions } from "./gate.js";

export type FetchLimiter = ((request: Request, connection?: { remoteAddress?: string }) => Promise<Response | undefined>) & {
  /** The response with the headers of the decision made for this request (a copy when its headers cannot change). */
  withHeaders(request: Request, response: Response): Response;
  readonly gate: Gate<Request>;
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function floodgate(options: MiddlewareOptions<Request>): FetchLimiter {
  const peers = new WeakMap<Request, string>();
  const passed = new WeakMap<Request, HttpHeader[]>();
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
    passed.set(request, verdict.headers);
    if (verdict.delayMs > 0) await sleep(verdict.delayMs);
    return undefined;
  };
  const withHeaders = (request: Request, response: Response): Response => {
    const headers = passed.get(request) ?? [];
    if (headers.length === 0) return response;
    const target = new Response(response.body, response);
    for (const { name, value } of headers) target.headers.set(name, value);
    return target;
  };
  return Object.assign(limit, { withHeaders, gate });
}
