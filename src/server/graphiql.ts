/**
 * GraphiQL for a person with a browser: a GET of /graphql that asks for HTML
 * (a browser's Accept header) is answered with GraphiQL's page, and its
 * scripts and stylesheet are served under /graphiql/ from the packages
 * installed with Floodgate (graphiql's UMD build and the React it runs on),
 * so it works offline and loads nothing from a CDN. The page is static: it
 * holds no token and reads nothing; the token goes in GraphiQL's headers
 * editor, and every request it sends is an ordinary POST to /graphql, with
 * the same authentication, limits and CSRF protection as any other. It is
 * served only when GRAPHIQL is on (the default outside production).
 */

import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** Under this path the page finds its assets (relative to /graphql, so a proxy's prefix is kept). */
export const GRAPHIQL_ASSETS_PATH = "/graphiql/";

/**
 * What the page starts with: the fetcher POSTs to the address the page came
 * from, and the headers editor is open with the header to fill in. Once a
 * token is there, GraphiQL's "Re-fetch GraphQL schema" (or Shift-Ctrl-R)
 * reads the schema with it.
 */
const START_SCRIPT = `"use strict";
const url = new URL(window.location.pathname, window.location.href).href;
ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(GraphiQL, {
    fetcher: GraphiQL.createFetcher({ url }),
    defaultHeaders: JSON.stringify({ Authorization: "Bearer <token>" }, null, 2),
    defaultEditorToolsVisibility: "headers",
    isHeadersEditorEnabled: true,
  }),
);
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Floodgate · GraphiQL</title>
<link rel="stylesheet" href="graphiql/graphiql.min.css">
<style>body { margin: 0; } #graphiql { height: 100vh; }</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script src="graphiql/react.production.min.js"></script>
<script src="graphiql/react-dom.production.min.js"></script>
<script src="graphiql/graphiql.min.js"></script>
<script src="graphiql/start.js"></script>
</body>
</html>
`;

/**
 * Only this origin's scripts, stylesheets and requests; inline styles are
 * allowed because CodeMirror and GraphiQL position their panes with style
 * attributes; nothing may frame the page.
 */
const CONTENT_SECURITY_POLICY = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

interface Asset {
  type: string;
  body: Buffer | string;
}

export interface GraphiQL {
  /** Whether a request to /graphql is a browser asking for the page. */
  wantsPage(req: IncomingMessage): boolean;
  page(res: ServerResponse): void;
  /** An asset by its path under /graphiql/; false when there is none such. */
  asset(path: string, res: ServerResponse): boolean;
}

/** Reads the assets once, from the installed packages. */
export function graphiql(): GraphiQL {
  const require = createRequire(import.meta.url);
  const packageFile = (name: string, file: string): Buffer => readFileSync(join(dirname(require.resolve(`${name}/package.json`)), file));
  const assets = new Map<string, Asset>([
    ["graphiql.min.css", { type: "text/css; charset=utf-8", body: packageFile("graphiql", "graphiql.min.css") }],
    ["graphiql.min.js", { type: "text/javascript; charset=utf-8", body: packageFile("graphiql", "graphiql.min.js") }],
    ["react.production.min.js", { type: "text/javascript; charset=utf-8", body: packageFile("react", "umd/react.production.min.js") }],
    ["react-dom.production.min.js", { type: "text/javascript; charset=utf-8", body: packageFile("react-dom", "umd/react-dom.production.min.js") }],
    ["start.js", { type: "text/javascript; charset=utf-8", body: START_SCRIPT }],
  ]);
  const send = (res: ServerResponse, { type, body }: Asset): void => {
    res.statusCode = 200;
    res.setHeader("content-type", type);
    res.setHeader("content-security-policy", CONTENT_SECURITY_POLICY);
    res.setHeader("x-content-type-options", "nosniff");
    res.setHeader("cache-control", "no-cache");
    res.end(body);
  };
  return {
    wantsPage: (req) => (req.method === "GET" || req.method === "HEAD") && !(req.url ?? "").includes("?") && (req.headers.accept ?? "").includes("text/html"),
    page: (res) => send(res, { type: "text/html; charset=utf-8", body: PAGE }),
    asset: (path, res) => {
      const asset = assets.get(path.slice(GRAPHIQL_ASSETS_PATH.length));
      if (asset === undefined) return false;
      send(res, asset);
      return true;
    },
  };
}
