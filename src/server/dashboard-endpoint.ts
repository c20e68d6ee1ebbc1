/**
 * GET /dashboard: the operators' dashboard, static files built from
 * dashboard/ into dist/dashboard/ (scripts/build-dashboard.mjs, run by
 * `npm run build`). They carry no data and need no token: the page asks for a
 * key and sends it with every call to /graphql, like any client. The content
 * security policy lets the page talk to this origin only and run only its own
 * script, so nothing it shows can load or send anything elsewhere.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { readFile } from "node:fs/promises";
import { sendJson } from "./json-response.js";

const FILES: Record<string, { file: string; type: string }> = {
  "/dashboard": { file: "index.html", type: "text/html; charset=utf-8" },
  "/dashboard/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/dashboard/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/dashboard/app.js.map": { file: "app.js.map", type: "application/json" },
  "/dashboard/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
  "/dashboard/favicon.svg": { file: "favicon.svg", type: "image/svg+xml" },
};

const HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // Rebuilt files are picked up at once; they are small enough to be fetched again.
  "cache-control": "no-cache",
};

/** Where `npm run build` puts the dashboard, seen from src/server/ and from dist/server/ alike. */
export const DASHBOARD_DIR = new URL("../../dist/dashboard/", import.meta.url);

export function isDashboardPath(path: string): boolean {
  return path === "/dashboard" || path.startsWith("/dashboard/");
}

export function serveDashboard(directory: URL = DASHBOARD_DIR): (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void> {
  return async (req, res, path) => {
    const entry = FILES[path];
    if (req.method !== "GET" && req.method !== "HEAD") return sendJson(res, 405, { error: "method not allowed" });
    if (entry === undefined) return sendJson(res, 404, { error: "not found" });
    let body: Buffer;
    try {
      body = await readFile(new URL(entry.file, directory));
    } catch {
      res.writeHead(503, { "content-type": "text/plain; charset=utf-8", ...HEADERS });
      return void res.end("The dashboard is not built: run `npm run build` (npm start does it), then reload.\n");
    }
    res.writeHead(200, { "content-type": entry.type, "content-length": body.length, ...HEADERS });
    res.end(req.method === "HEAD" ? undefined : body);
  };
}
