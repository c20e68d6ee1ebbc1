/**
 * HEAD is GET without the content (RFC 9110 §9.3.2): Express, Fastify
 * (exposeHeadRoutes) and Hono answer it by running the GET route's handler,
 * whole. A rule limiting GET on a path must then count HEAD requests too, or
 * HEAD runs the limited handler as often as a caller likes.
 */

import { describe, expect, it } from "vitest";
import { FRAMEWORKS, startWebApp, type Framework } from "../support/web-apps.js";
import { embeddedFloodgate } from "./embedded-floodgate.js";

const floodgate = embeddedFloodgate();

describe.each(FRAMEWORKS)("%s", (framework: Framework) => {
  it("counts a HEAD request, which runs the GET handler, against a GET rule", async () => {
    const { client, tenant } = await floodgate.limited({ scope: ["IP"], limit: 1, resource: "/api/orders", method: "GET" });
    const app = floodgate.keep(await startWebApp(framework, { client, tenant }));
    expect((await fetch(`${app.url}/api/orders`)).status).toBe(200);
    expect((await fetch(`${app.url}/api/orders`, { method: "HEAD" })).status).toBe(429);
  });
});
