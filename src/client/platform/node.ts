/**
 * What the client uses in Node (package.json "imports" maps #floodgate-platform
 * here under the "node" condition): an undici Pool, keep-alive and without
 * pipelining, which made about 14k requests/s where Node 20's global fetch
 * made 2.7k (docs: ENVIRONMENT.md), and `ws` for the push channel where the
 * runtime has no WebSocket of its own (Node 20). Node also has what LOCAL
 * needs (node:crypto and node:net, through the domain's request parsing and
 * bucket keys).
 */

import { Pool } from "undici";
import WebSocket from "ws";
import { LocalLimiter } from "../local-limiter.js";
import type { Transport, TransportOptions } from "../transport.js";
import type { Platform } from "./types.js";

function poolTransport({ url, authorization, connections }: TransportOptions): Transport {
  const pool = new Pool(url.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const path = `${url.pathname}${url.search}`;
  const headers = { "content-type": "application/json", authorization };
  return {
    async post(body, signal) {
      const response = await pool.request({ path, method: "POST", headers, body, signal });
      return { status: response.statusCode, text: await response.body.text() };
    },
    close: () => pool.close(),
  };
}

export const platform: Platform = {
  transport: poolTransport,
  WebSocket: (globalThis.WebSocket as Platform["WebSocket"] | undefined) ?? (WebSocket as unknown as Platform["WebSocket"]),
  LocalLimiter,
};
