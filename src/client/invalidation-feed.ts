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
 *
 * The waits between attempts are the feed's own, not graphql-ws's: graphql-ws
 * connects when subscribed and never tries again by itself. Its dispose()
 * waits for the connection under way, and that connection only starts when
 * graphql-ws's own wait before it has ended: a client closed during an
 * outage waited up to the longest wait, 10 s, and forever for a connection
 * that Floodgate accepted and never answered. A wait of the feed's own is
 * cancelled by close(), and a connection not yet acknowledged is abandoned
 * (graphql-ws's terminate): close() returns at once. An attempt that goes
 * CONNECT_TIMEOUT_MS unacknowledged is abandoned too, and tried again.
 */

import { createClient, type Client } from "graphql-ws/client";
import type { FloodgateInvalidationsSubscription } from "./generated/operations.js";
import type { Platform } from "./platform/types.js";
import type { RefusalCache } from "./refusal-cache.js";

export const PING_MS = 5_000;
export const PONG_TIMEOUT_MS = 3_000;
/** An attempt to connect not acknowledged by then is abandoned and made again after a wait (the cache is not live meanwhile). */
export const CONNECT_TIMEOUT_MS = 5_000;
/** Waits before subscribing again after the subscription failed, for whatever reason: doubling up to the last. */
const RETRY_WAITS_MS = [250, 500, 1_000, 2_000, 5_000, 10_000];

interface Closable {
  close(code?: number, reason?: string): void;
  /** ws's (Node): lets the socket go at once, where its close() waits up to 30 s for the peer's close frame. */
  terminate?(): void;
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
  /** The connection graphql-ws has had acknowledged; null while one is under way, and between connections. */
  private socket: Closable | null = null;
  private connectTimer: ReturnType<typeof setTimeout> | null = null;
  private pongTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly options: InvalidationFeedOptions) {
    const url = new URL(options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    this.client = createClient({
      url: url.href,
      webSocketImpl: options.WebSocket,
      connectionParams: { authorization: options.authorization },
      lazy: true,
      keepAlive: PING_MS,
      retryAttempts: 0,
      on: {
        connecting: () => {
          this.stopTimer("connectTimer");
          this.connectTimer = setTimeout(() => this.client.terminate(), CONNECT_TIMEOUT_MS);
        },
        connected: (connected) => {
          this.stopTimer("connectTimer");
          this.socket = connected as Closable;
        },
        closed: () => {
          this.stopTimer("connectTimer");
          this.stopTimer("pongTimer");
          this.socket = null;
          options.cache.setLive(false);
        },
        ping: (received) => {
          if (received) return;
          this.stopTimer("pongTimer");
          // A peer that stopped answering is abandoned rather than closed: ws's close() waits up to 30 s for a close
          // frame such a peer never sends, and the channel counted as live (the cache serving) until it gave up.
          this.pongTimer = setTimeout(() => this.abandon(), PONG_TIMEOUT_MS);
        },
        pong: (received) => {
          if (received) this.stopTimer("pongTimer");
        },
      },
    });
    this.subscribe();
  }

  close(): Promise<void> {
    this.closed = true;
    this.stopTimer("resubscribe");
    const socket = this.socket;
    this.unsubscribe?.();
    this.options.cache.setLive(false);
    if (socket === null) this.client.terminate();
    // graphql-ws's dispose() rejects with the last connection attempt's error when Floodgate was down: closing still succeeds.
    return Promise.resolve(this.client.dispose())
      .catch(() => undefined)
      .then(() => {
        // The close frame is sent; ws would hold the socket and a timer up to 30 s more for a peer gone silent.
        socket?.terminate?.();
        this.stopTimer("pongTimer");
        this.stopTimer("connectTimer");
      });
  }

  /** Gives the acknowledged connection up now: graphql-ws and the feed see it closed at once (the cache forgets, the feed subscribes again). */
  private abandon(): void {
    const socket = this.socket;
    this.client.terminate();
    socket?.terminate?.();
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
          } else if (invalidation.kind === "ALLOW_LISTED") {
            // Without a tenant (a Floodgate that does not say), every refusal is forgotten.
            cache.forgetTenant(invalidation.tenantId ?? "*");
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

  /** The subscription ended, or its connection failed: what it would have said is lost, so the cache forgets and the feed subscribes again after a wait. */
  private failed(): void {
    this.options.cache.setLive(false);
    if (this.closed) return;
    this.stopTimer("resubscribe");
    this.resubscribe = setTimeout(() => {
      this.resubscribe = null;
      if (!this.closed) this.subscribe();
    }, waitBefore(this.failures++));
  }

  private stopTimer(which: "connectTimer" | "pongTimer" | "resubscribe"): void {
    const timer = this[which];
    if (timer !== null) clearTimeout(timer);
    this[which] = null;
  }
}

function waitBefore(retries: number): number {
  return RETRY_WAITS_MS[Math.min(retries, RETRY_WAITS_MS.length - 1)]!;
}

