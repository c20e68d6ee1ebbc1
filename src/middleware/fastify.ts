/**
 * floodgate/fastify: a Fastify plugin, registered on the root instance (it
 * does not encapsulate, like fastify-plugin's) so that every route is checked.
 *
 *   await app.register(floodgatePlugin, { url, token, tenant: "acme", skip: ["/healthz"] });
 *
 * It checks in onRequest, before the body is read: the decision's headers go
 * on every checked reply; a denial is answered there (429, or 403 for a deny-listed request; problem details);
 * THROTTLE holds the request for its delay; a request whose caller left
 * meanwhile is not routed. A client the plugin made is closed with the
 * server. A CONCURRENCY lease is released when the reply has been sent or the
 * request aborted, by the raw response's finish or close, which cover both.
 * See gate.ts for how a request becomes a check.
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { nodeRequestView } from "./express.js";
import { createGate, releaseWhenDone, type Gate, type MiddlewareOptions } from "./gate.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The plugin's gate: its client's stats(), say. */
    floodgate: Gate<FastifyRequest>;
  }
}

export type FloodgatePluginOptions = MiddlewareOptions<FastifyRequest>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function floodgatePlugin(fastify: FastifyInstance, options: FloodgatePluginOptions, done: (error?: Error) => void): void {
  const gate = createGate<FastifyRequest>(options, (request) => nodeRequestView(request.raw), routerIgnoresCase(fastify));
  fastify.decorate("floodgate", gate);
  fastify.addHook("onRequest", async (request, reply) => {
    const verdict = await gate.decide(request);
    if (verdict.kind === "skip") return;
    releaseWhenDone(gate, verdict, reply.raw);
    if (callerLeft(reply)) return reply;
    for (const { name, value } of verdict.headers) void reply.header(name, value);
    if (verdict.kind === "deny") return reply.code(verdict.status).send(verdict.body);
    if (verdict.delayMs > 0) {
      await sleep(verdict.delayMs);
      if (callerLeft(reply)) return reply;
    }
  });
  fastify.addHook("onClose", () => gate.close());
  done();
}

/**
 * Whether Fastify's router ignores letter case: caseSensitive off in its
 * routerOptions, or in its options (the older place, which the router reads
 * when routerOptions does not say).
 */
function routerIgnoresCase(fastify: FastifyInstance): boolean {
  const config = fastify.initialConfig as { routerOptions?: { caseSensitive?: boolean }; caseSensitive?: boolean };
  return (config.routerOptions?.caseSensitive ?? config.caseSensitive) === false;
}

/**
 * Whether the caller has gone, its connection closed while its request was
 * checked or held: its route is then not run (THROTTLE's delay holds back its
 * work; doing it for nobody would do it twice when the caller retries). A
 * hijacked reply is Fastify's way to end a request's lifecycle in a hook.
 */
function callerLeft(reply: FastifyReply): boolean {
  if (!reply.raw.closed) return false;
  reply.hijack();
  return true;
}

// What fastify-plugin sets: register on the instance it is given, not in a child context, and be named in errors.
Object.assign(floodgatePlugin, { [Symbol.for("skip-override")]: true, [Symbol.for("fastify.display-name")]: "floodgate" });

export default floodgatePlugin;
