/** GET /dashboard serves the built files with a policy that keeps the page to this origin, and says so when they are not built. */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDashboard } from "../../scripts/build-dashboard.mjs";
import { serveDashboard } from "../../src/server/dashboard-endpoint.js";

async function serve(handler: ReturnType<typeof serveDashboard>): Promise<{ server: Server; base: string }> {
  const server = createServer((req, res) => void handler(req, res, new URL(req.url!, "http://x").pathname));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("the dashboard's files", () => {
  let built: { server: Server; base: string };
  let missing: { server: Server; base: string };
  beforeAll(async () => {
    built = await serve(serveDashboard(new URL(`file://${await buildDashboard()}`)));
    missing = await serve(serveDashboard(new URL("file:///nonexistent/floodgate-dashboard/")));
  });
  afterAll(() => {
    built?.server.close();
    missing?.server.close();
  });

  it("serves the page, its script and its stylesheet, each with its type and the content security policy", async () => {
    for (const [path, type] of [
      ["/dashboard", "text/html; charset=utf-8"],
      ["/dashboard/", "text/html; charset=utf-8"],
      ["/dashboard/app.js", "text/javascript; charset=utf-8"],
      ["/dashboard/style.css", "text/css; charset=utf-8"],
      ["/dashboard/favicon.svg", "image/svg+xml"],
    ]) {
      const response = await fetch(`${built.base}${path}`);
      expect(response.status, path).toBe(200);
      expect(response.headers.get("content-type")).toBe(type);
      expect(response.headers.get("content-security-policy")).toContain("connect-src 'self'");
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    }
    expect(await (await fetch(`${built.base}/dashboard`)).text()).toContain('<script type="module" src="/dashboard/app.js"></script>');
  });

  it("answers 404 for any other file, 405 for anything but GET and HEAD", async () => {
    expect((await fetch(`${built.base}/dashboard/../package.json`)).status).toBe(404);
    expect((await fetch(`${built.base}/dashboard/secret.txt`)).status).toBe(404);
    expect((await fetch(`${built.base}/dashboard`, { method: "POST" })).status).toBe(405);
    const head = await fetch(`${built.base}/dashboard/app.js`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  it("says how to build it when it is not built", async () => {
    const response = await fetch(`${missing.base}/dashboard`);
    expect(response.status).toBe(503);
    expect(await response.text()).toBe("The dashboard is not built: run `npm run build` (npm start does it), then reload.\n");
  });
});
