/**
 * Who is on each WebSocket. A socket authenticates once, in its
 * connection_init payload, and keeps that caller for its life; this keeps the
 * caller per socket, and the sockets per API key, so that one key cannot hold
 * more than `maxSocketsPerKey` of them on this instance (each socket may in
 * turn hold a bounded number of subscriptions, see subscription-server.ts):
 * one leaked or hostile key must not make every event of its tenant fan out
 * into an unbounded number of messages.
 */

import type { WebSocket } from "ws";
import type { Principal } from "../domain/access.js";
import type { ApiKeyService } from "../engine/api-key-service.js";

/** graphql-ws's code for "too many" (it closes a socket that sends connection_init twice with it); its client does not retry on it. */
export const TOO_MANY_SOCKETS_CLOSE_CODE = 4429;

export interface SocketSessionsOptions {
  keys: ApiKeyService;
  /** Sockets one API key (or ADMIN_TOKEN) may hold open at once on this instance. */
  maxSocketsPerKey: number;
}

interface Session {
  socket: WebSocket;
  principal: Principal;
}

export class SocketSessions {
  private readonly sessions = new Map<WebSocket, Session>();
  private readonly byKey = new Map<string, Set<Session>>();

  constructor(private readonly options: SocketSessionsOptions) {}

  /**
   * Authenticates a socket's connection_init: true when it may go on. A bad
   * token is false (graphql-ws closes the socket with 4403); a key already
   * holding its share of sockets gets the socket closed here with 4429.
   */
  async open(socket: WebSocket, authorization: unknown): Promise<boolean> {
    let principal: Principal;
    try {
      principal = await this.options.keys.authenticate(typeof authorization === "string" ? authorization : null);
    } catch {
      return false;
    }
    const held = this.byKey.get(principal.keyId) ?? new Set<Session>();
    if (held.size >= this.options.maxSocketsPerKey) {
      socket.close(TOO_MANY_SOCKETS_CLOSE_CODE, `this API key already holds ${this.options.maxSocketsPerKey} sockets (MAX_SOCKETS_PER_KEY)`);
      return false;
    }
    const session = { socket, principal };
    this.sessions.set(socket, session);
    this.byKey.set(principal.keyId, held.add(session));
    return true;
  }

  /** The caller of an open, authenticated socket. */
  principalOf(socket: WebSocket): Principal {
    const session = this.sessions.get(socket);
    if (session === undefined) throw new Error("a subscription arrived on a socket that was never authenticated");
    return session.principal;
  }

  /** Forgets a socket once it has closed. */
  closed(socket: WebSocket): void {
    const session = this.sessions.get(socket);
    if (session === undefined) return;
    this.sessions.delete(socket);
    const held = this.byKey.get(session.principal.keyId);
    held?.delete(session);
    if (held?.size === 0) this.byKey.delete(session.principal.keyId);
  }
}
