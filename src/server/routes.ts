import type { IncomingMessage, ServerResponse } from "node:http";
import { GRAPHIQL_ASSETS_PATH, type GraphiQL } from "./graphiql.js";
import type { Logger } from "./logger.js";
import { sendJson } from "./json-response.js";
import { isDashboardPath } from "./dashboard-endpoint.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

export interface Endpoints {
  /** POST and GET /graphql (graphql-endpoint.ts). */
  graphql: Handler;
  /** GET /metrics (metrics-endpoint.ts). */
  metrics: Handler;
  /** GraphiQL's page (GET /graphql from a browser) and its assets (GET /graphiql/…); null: GRAPHIQL is off. */
  graphiql: GraphiQL | null;
  /** GET /dashboard and its files (dashboard-endpoint.ts). */
  dashboard: (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>;
  /** GET /readyz: its body, and whether it answers 200 or 503. */
  readiness: () => { ready: boolean; [detail: string]: unknown };
}

const PATHS = ["/graphql", "/healthz", "/readyz", "/metrics", "/dashboard"];

/** Every request to its endpoint; one that fails unexpectedly is logged and answered 500 (or cut off, if its answer had begun). */
export function router(endpoints: Endpoints, logger: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = pathOf(req.url ?? "/");
    const { graphiql } = endpoints;
    if (path === "/graphql" && graphiql?.wantsPage(req)) return graphiql.page(res);
    if (path === "/graphql") return endpoints.graphql(req, res);
    if (graphiql !== null && path.startsWith(GRAPHIQL_ASSETS_PATH) && req.method === "GET" && graphiql.asset(path, res)) return;
    if (path === "/healthz" && req.method === "GET") return sendJson(res, 200, { status: "ok" });
    if (path === "/metrics" && req.method === "GET") return endpoints.metrics(req, res);
    if (isDashboardPath(path)) return endpoints.dashboard(req, res, path);
    if (path === "/readyz" && req.method === "GET") {
      const readiness = endpoints.readiness();
      return sendJson(res, readiness.ready ? 200 : 503, readiness);
    }
    sendJson(res, 404, { error: "not found", endpoints: PATHS });
  };
  return (req, res) => {
    route(req, res).catch((error: unknown) => {
      logger.error({ err: error }, "request failed");
      if (!res.headersSent) sendJson(res, 500, { error: "internal server error" });
      else res.destroy();
    });
  };
}

function pathOf(url: string): string {
  const end = url.indexOf("?");
  return end === -1 ? url : url.slice(0, end);
}
