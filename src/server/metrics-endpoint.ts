/**
 * GET /metrics. The metrics name every tenant and every rule id
 * (floodgate_rule_decisions_total), so they are not for anyone who can reach
 * the API port:
 *   - on the API port, a caller shows a bearer token that may see every
 *     tenant: an ADMIN key (or ADMIN_TOKEN), or METRICS_TOKEN, a secret that
 *     opens /metrics and nothing else, for Prometheus (tenant-scoped keys,
 *     VIEWER included, are refused: they would read other tenants' ids);
 *   - METRICS_PORT serves them without a token on a listener of its own,
 *     bound to METRICS_HOST (loopback by default), for a scrape network that
 *     callers of the API cannot reach.
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { ErrorCode, toGraphQLError } from "../api/errors.js";
import { authorize } from "../domain/access.js";
import { ALL_TENANTS } from "../domain/rule.js";
import type { ApiKeyService } from "../engine/access/api-key-service.js";

export interface MetricsAccess {
  registry: Registry;
  keys: ApiKeyService;
  /** METRICS_TOKEN, or null. */
  token: string | null;
}

const STATUS_OF: Record<string, number> = {
  [ErrorCode.UNAUTHENTICATED]: 401,
  [ErrorCode.FORBIDDEN]: 403,
  [ErrorCode.SERVICE_UNAVAILABLE]: 503,
};

/** /metrics on the API port: the metrics for METRICS_TOKEN or an ADMIN, else 401 or 403 with a GraphQL-style error and nothing of the metrics. */
export async function serveMetricsToAdmins(req: IncomingMessage, res: ServerResponse, access: MetricsAccess): Promise<void> {
  const authorization = req.headers.authorization;
  if (!(access.token !== null && bearerIs(authorization, access.token))) {
    try {
      authorize(await access.keys.authenticate(authorization), "readMetrics", ALL_TENANTS);
    } catch (error) {
      const refusal = toGraphQLError(error);
      const status = refusal === null ? undefined : STATUS_OF[refusal.extensions.code as string];
      if (refusal === null || status === undefined) throw error;
      const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
      if (status === 401) headers["www-authenticate"] = 'Bearer realm="floodgate metrics"';
      res.writeHead(status, headers);
      res.end(JSON.stringify({ errors: [{ message: refusal.message, extensions: { code: refusal.extensions.code } }] }));
      return;
    }
  }
  await sendMetrics(res, access.registry);
}

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/** METRICS_PORT: GET /metrics without a token, and nothing else. */
export async function startMetricsListener(registry: Registry, port: number, host: string, onError: (error: unknown) => void): Promise<MetricsListener> {
  const server = createServer((req, res) => {
    if (req.url?.split("?")[0] !== "/metrics" || req.method !== "GET") {
      res.writeHead(404, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify({ error: "not found", endpoints: ["/metrics"] }));
      return;
    }
    sendMetrics(res, registry).catch((error: unknown) => {
      onError(error);
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}/metrics`,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // A scrape cut short at shutdown costs nothing: Prometheus scrapes again.
      server.closeAllConnections();
      await closed;
    },
  };
}

async function sendMetrics(res: ServerResponse, registry: Registry): Promise<void> {
  const text = await registry.metrics();
  res.writeHead(200, { "content-type": registry.contentType });
  res.end(text);
}

/** Whether the header is "Bearer <token>", compared in constant time (over digests, whose lengths always match). */
function bearerIs(authorization: string | undefined, token: string): boolean {
  const given = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return given !== undefined && timingSafeEqual(digest(given), digest(token));
}
