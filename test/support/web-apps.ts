/**
 * Real Express 5, Fastify 5 and Hono 4 apps on ephemeral ports, each limited
 * by Floodgate through its middleware (floodgate/express, floodgate/fastify,
 * floodgate/fetch), as a backend would use them. Every app answers every path
 * with 200 {"served": <path>}, and /healthz with 200 "ok", and keeps the
 * paths its routes ran for.
 */

import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import type { FloodgateClient } from "floodgate/client";
import { floodgate as expressFloodgate } from "floodgate/express";
import { floodgatePlugin } from "floodgate/fastify";
import { floodgate as fetchFloodgate } from "floodgate/fetch";

export const FRAMEWORKS = ["express", "fastify", "hono"] as const;
export type Framework = (typeof FRAMEWORKS)[number];

export interface WebApp {
  url: string;
  /** The paths its catch-all route ran for, in order. */
  served: string[];
  close(): Promise<void>;
}

/** The options every framework's middleware takes alike (the client, the tenant, trustProxy, cookieName...). */
export interface LimitOptions {
  client: FloodgateClient;
  tenant: string;
  trustProxy?: boolean | number;
  cookieName?: string;
  skip?: string[];
  ignorePathCase?: boolean;
  /** The app's own router: Express's "case sensitive routing" setting, Fastify's routerOptions.caseSensitive (each framework's default when not given). */
  caseSensitiveRouting?: boolean;
}

export async function startWebApp(framework: Framework, options: LimitOptions): Promise<WebApp> {
  switch (framework) {
    case "express":
      return startExpress(options);
    case "fastify":
      return startFastify(options);
    case "hono":
      return startHono(options);
  }
}

/** An Express app limited by the middleware, mounted at `mount` as Express's guide mounts middleware (app.use(path, middleware)); its health check below it. */
export async function startExpress(options: LimitOptions, mount = ""): Promise<WebApp> {
  const app = express();
  if (options.caseSensitiveRouting !== undefined) app.set("case sensitive routing", options.caseSensitiveRouting);
  if (mount === "") app.use(expressFloodgate(options));
  else app.use(mount, expressFloodgate(options));
  app.get(`${mount}/healthz`, (_req, res) => void res.send("ok"));
  const served: string[] = [];
  app.all("/{*path}", (req, res) => {
    served.push(req.path);
    res.json({ served: req.path });
  });
  const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
    const listening = app.listen(0, "127.0.0.1", () => resolve(listening));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function startFastify(options: LimitOptions): Promise<WebApp> {
  const app = Fastify(options.caseSensitiveRouting === undefined ? {} : { routerOptions: { caseSensitive: options.caseSensitiveRouting } });
  await app.register(floodgatePlugin, options);
  app.get("/healthz", async () => "ok");
  const served: string[] = [];
  app.all("/*", async (request) => {
    const path = request.url.split("?")[0]!;
    served.push(path);
    return { served: path };
  });
  const address = await app.listen({ port: 0, host: "127.0.0.1" });
  return { url: address, served, close: () => app.close() };
}

async function startHono(options: LimitOptions): Promise<WebApp> {
  const limit = fetchFloodgate(options);
  const app = new Hono<{ Bindings: { incoming: { socket: { remoteAddress?: string } } } }>();
  app.use(async (c, next) => {
    const denied = await limit(c.req.raw, { remoteAddress: c.env.incoming.socket.remoteAddress });
    if (denied) return denied;
    await next();
    c.res = limit.withHeaders(c.req.raw, c.res);
  });
  app.get("/healthz", (c) => c.text("ok"));
  const served: string[] = [];
  app.all("*", (c) => {
    served.push(c.req.path);
    return c.json({ served: c.req.path });
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const listening = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(listening));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
