/**
 * What the client uses in fetch-based runtimes (edge functions, Deno, Bun,
 * browsers): the runtime's own fetch and WebSocket, nothing of Node's. LOCAL
 * is not offered here: it needs node:crypto and node:net, and an edge
 * isolate's memory is too short-lived to count in anyway.
 */

import { fetchTransport, type FetchFunction } from "../transport.js";
import type { Platform } from "./types.js";

export const platform: Platform = {
  transport: (options) => fetchTransport(globalThis.fetch as unknown as FetchFunction, options),
  WebSocket: (globalThis.WebSocket as Platform["WebSocket"] | undefined) ?? null,
  LocalLimiter: null,
};
