/**
 * The push channel that keeps the refusal cache honest: the invalidations
 * subscription over graphql-ws. The cache is live from the subscription's
 * LISTENING message until the channel fails in any way: the socket closes,
 * the subscription ends with an error (SUBSCRIBER_TOO_SLOW, say), or a ping
 * goes PONG_TIMEOUT_MS without its pong (a connection that died without
 * closing). Then the cache forgets everything, and the channel reconnects and
 * subscribes again by itself; the cache is live again at the next LISTENING.
 * A silently dead connection is thus noticed within PING_MS +
 * PONG_TIMEOUT_MS, the longest a missed invalidation can be served.
 */

import { createClient, type Client } from "graphql-ws/client";
import type { FloodgateInvalidationsSubscription } from "./generated/operations.js";
import type { Platform } from "./platform/types.js";
import type { RefusalCache } from "./refusal-cache.js";

export const PING_MS = 5_000;
export const PONG_TIMEOUT_MS = 3_000;
/** Waits before subscribing again after the subscription failed, or connecting again after the socket did: doubling up to the last. */
const RETRY_WAITS_MS = [250, 500, 1_000, 2_000, 5_000, 10_000];

interface Closable {
  close(code?: number, reason?: string): void;
}

export interface InvalidationFeedOptions {
  /** Floodgate's GraphQL endpoint over HTTP(S); the feed uses the same path over WS(S). */
  url: URL;
  authorization: string;
  WebSocket: NonNullable<Platform["WebSocket"]>;
  cache: RefusalCache;
  /** The document text, as the client sends its documents. */
  query: string;
}

export class InvalidationFeed {
  private readonly client: Client;
  private unsubscribe: (() => void) | null = null;
  private resubscribe: ReturnType<typeof setTimeout> | null = null;
  private failures = 0;
  private closed = false;

  constructor(private readonly options: InvalidationFeedOptions) {
    const url = new URL(options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    let socket: Closable | null = null;
    let pongTimer: ReturnType<typeof setTimeout> | null = null;
    const stopWaitingForPong = () => {
      if (pongTimer !== null) clearTimeout(pongTimer);
      pongTimer = null;
    };
    this.client = createClient({
      url: url.href,
      webSocketImpl: options.WebSocket,
      connectionParams: { authorization: options.authorization },
      lazy: false,
      keepAlive: PING_MS,
      retryAttempts: Number.POSITIVE_INFINITY,
      shouldRetry: () => true,
      retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, waitBefore(retries))),
      on: {
        connected: (connected) => {
          socket = connected as Closable;
        },
        closed: () => {
          stopWaitingForPong();
          socket = null;
          options.cache.setLive(false);
        },
        ping: (received) => {
          if (received) return;
          stopWaitingForPong();
          // 4408: graphql-ws's own code for a peer that stopped answering.
          pongTimer = setTimeout(() => socket?.close(4408, "no pong"), PONG_TIMEOUT_MS);
        },
        pong: (received) => {
          if (received) stopWaitingForPong();
        },
      },
    });
    this.subscribe();
  }

  close(): Promise<void> {
    this.closed = true;
    if (this.resubscribe !== null) clearTimeout(this.resubscribe);
    this.unsubscribe?.();
    this.options.cache.setLive(false);
    // graphql-ws's dispose() rejects with the last connection attempt's error when Floodgate was down: closing still succeeds.
    return Promise.resolve(this.client.dispose()).catch(() => undefined);
  }

  private subscribe(): void {
    const { cache, query } = this.options;
    this.unsubscribe = this.client.subscribe<FloodgateInvalidationsSubscription>(
      { query },
      {
        next: ({ data }) => {
          const invalidation = data?.invalidations;
          if (!invalidation) return;
          if (invalidation.kind === "LISTENING") {
            this.failures = 0;
            cache.setLive(true);
          } else if (invalidation.ruleId !== null && invalidation.key !== null) {
            cache.forgetBucket(invalidation.ruleId, invalidation.key);
          } else if (invalidation.ruleId !== null) {
            cache.forgetRule(invalidation.ruleId);
          }
        },
        error: () => this.failed(),
        complete: () => this.failed(),
      },
    );
  }

  /** The subscription ended: what it would have said is lost, so the cache forgets and the feed subscribes again. */
  private failed(): void {
    this.options.cache.setLive(false);
    if (this.closed) return;
    this.resubscribe = setTimeout(() => {
      this.resubscribe = null;
      if (!this.closed) this.subscribe();
    }, waitBefore(this.failures++));
  }
}

function waitBefore(retries: number): number {
  return RETRY_WAITS_MS[Math.min(retries, RETRY_WAITS_MS.length - 1)]!;
}

