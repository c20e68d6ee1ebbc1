/**
 * GraphQL subscriptions over WebSocket with graphql-ws's own client, as a
 * dashboard would subscribe. A server gives no sign that a subscription has
 * started listening, so ready() makes one: it triggers a probe event until the
 * subscription delivers it.
 */

import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print, type GraphQLFormattedError } from "graphql";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";

export interface TestSubscription<T> {
  /** Every event delivered so far, with when it arrived (Date.now()). */
  readonly received: { data: T; at: number }[];
  /** The errors the subscription ended with, if it did. */
  readonly errors: readonly GraphQLFormattedError[] | null;
  /** Resolves once `done` holds for what was received; rejects after timeoutMs. */
  until(done: (received: T[]) => boolean, timeoutMs?: number): Promise<T[]>;
  /** Calls `probe` until an event it caused (`isProbe`) arrives: from then on the subscription is listening. */
  ready(probe: (attempt: number) => Promise<void>, isProbe: (event: T) => boolean): Promise<void>;
  close(): Promise<void>;
}

export function subscribe<T, V extends Record<string, unknown>>(
  httpUrl: string,
  document: TypedDocumentNode<T, V>,
  variables: V,
  token: string,
): TestSubscription<T> {
  const client: Client = createClient({
    url: httpUrl.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: true,
    connectionParams: { authorization: `Bearer ${token}` },
  });
  const received: { data: T; at: number }[] = [];
  let errors: readonly GraphQLFormattedError[] | null = null;
  const stop = client.subscribe<T>(
    { query: print(document), variables },
    {
      next: (result) => {
        if (result.data) received.push({ data: result.data as T, at: Date.now() });
        if (result.errors) errors = result.errors;
      },
      error: (error) => {
        errors = Array.isArray(error) ? (error as GraphQLFormattedError[]) : [{ message: String(error) }];
      },
      complete: () => {},
    },
  );
  const until = async (done: (events: T[]) => boolean, timeoutMs = 5000): Promise<T[]> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const events = received.map((r) => r.data);
      if (done(events)) return events;
      if (errors) throw new Error(`the subscription failed: ${JSON.stringify(errors)}`);
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms with ${events.length} events: ${JSON.stringify(events).slice(0, 500)}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  return {
    received,
    get errors() {
      return errors;
    },
    until,
    ready: async (probe, isProbe) => {
      for (let attempt = 1; attempt <= 50; attempt++) {
        await probe(attempt);
        try {
          await until((events) => events.some(isProbe), 100);
          return;
        } catch {
          // Not listening yet: probe again.
        }
      }
      throw new Error("the subscription never started delivering events");
    },
    close: async () => {
      stop();
      await client.dispose();
    },
  };
}

/** One subscription on a TestSocket: its events and, once it ended, how. */
export interface SocketSubscription {
  readonly events: Record<string, unknown>[];
  /** The errors it ended with (an `error` message, or the errors of a result), or null. */
  readonly errors: readonly GraphQLFormattedError[] | null;
  readonly completed: boolean;
  /** Resolves once it ended (error or complete), with its errors (null when it completed). */
  ended(): Promise<readonly GraphQLFormattedError[] | null>;
  /** Completes it from the client's side. */
  stop(): void;
}

/** One graphql-ws socket that several subscriptions share, connected at once: what tests of sockets themselves (caps, close codes) need. */
export interface TestSocket {
  /** Resolves once the server acknowledged connection_init; rejects if the socket closed first. */
  connected: Promise<void>;
  /** Resolves with the close code once the socket is closed. */
  closed: Promise<number>;
  subscribe(query: string, variables?: Record<string, unknown>): SocketSubscription;
  close(): Promise<void>;
}

export function openSocket(httpUrl: string, token: string): TestSocket {
  let onConnected!: () => void;
  let onClosed!: (code: number) => void;
  let refused!: (error: Error) => void;
  const connected = new Promise<void>((resolve, reject) => {
    onConnected = resolve;
    refused = reject;
  });
  connected.catch(() => undefined);
  const closed = new Promise<number>((resolve) => (onClosed = resolve));
  const client = createClient({
    url: httpUrl.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: { authorization: `Bearer ${token}` },
    on: {
      connected: () => onConnected(),
      closed: (event) => {
        const code = (event as { code: number }).code;
        refused(new Error(`the socket closed with ${code} before it was acknowledged`));
        onClosed(code);
      },
    },
    onNonLazyError: () => undefined,
  });
  return {
    connected,
    closed,
    subscribe: (query, variables = {}) => {
      const events: Record<string, unknown>[] = [];
      let errors: readonly GraphQLFormattedError[] | null = null;
      let completed = false;
      let end!: (errors: readonly GraphQLFormattedError[] | null) => void;
      const ended = new Promise<readonly GraphQLFormattedError[] | null>((resolve) => (end = resolve));
      const stop = client.subscribe(
        { query, variables },
        {
          next: (result) => {
            if (result.data) events.push(result.data as Record<string, unknown>);
            if (result.errors) errors = result.errors;
          },
          error: (error) => {
            errors = Array.isArray(error) ? (error as GraphQLFormattedError[]) : [{ message: String(error) }];
            end(errors);
          },
          complete: () => {
            completed = true;
            end(errors);
          },
        },
      );
      return {
        events,
        get errors() {
          return errors;
        },
        get completed() {
          return completed;
        },
        ended: () => ended,
        stop,
      };
    },
    close: () => client.dispose() as Promise<void>,
  };
}
