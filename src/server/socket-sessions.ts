/**
 * Who is on each WebSocket, for as long as the key they came with stands. A
 * socket authenticates once, in its connection_init payload; after that:
 *
 * - a revocation, made on this instance or heard from another on the event
 *   bus, closes every socket of that key at once with 4403 (ending its
 *   subscriptions; each subscription also checks the key before every event,
 *   see event.resolver.ts, so nothing is delivered in between);
 * - every `revalidateMs` (API_KEY_CACHE_MS) each open socket's key is looked
 *   up in the database again, so a revocation whose message was lost closes
 *   its sockets within that time too. A database that cannot be reached
 *   leaves the sockets of keys known before open (see KnownApiKeys).
 *
 * It also keeps the sockets per key, so that one key cannot hold more than
 * `maxSocketsPerKey` of them on this instance (each socket may in turn hold a
 * bounded number of subscriptions, see subscription-server.ts): one leaked or
 * hostile key must not make every event of its tenant fan out into an
 * unbounded number of messages.
 */

import type { WebSocket } from "ws";
import type { Principal } from "../domain/access.js";
import { UnauthenticatedError, UnavailableError } from "../domain/errors.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";
import type { ApiKeyService } from "../engine/access/api-key-service.js";

/** graphql-ws's code for "too many" (it closes a socket that sends connection_init twice with it); its client does not retry on it. */
export const TOO_MANY_SOCKETS_CLOSE_CODE = 4429;
/** graphql-ws's "Forbidden", as for a bad token at connection_init; its client does not retry on it. */
export const REVOKED_CLOSE_CODE = 4403;
/** WebSocket's "Try Again Later": a key that cannot be verified while the key database is down (HTTP's 503). */
export const UNVERIFIABLE_CLOSE_CODE = 1013;
/** API_KEY_CACHE_MS may be 0 (no caching); sockets are still looked up no more often than this. */
const MIN_REVALIDATE_MS = 100;

export interface SocketSessionsOptions {
  keys: ApiKeyService;
  events: EventBus;
  /** Sockets one API key (or ADMIN_TOKEN) may hold open at once on this instance. */
  maxSocketsPerKey: number;
  /** How often every open socket's key is looked up again (API_KEY_CACHE_MS), at most every MIN_REVALIDATE_MS. */
  revalidateMs: number;
  log: { info(fields: object, message: string): void };
}

interface Session {
  socket: WebSocket;
  principal: Principal;
  /** As the socket sent it: what its key is looked up by again. */
  authorization: string;
}

export class SocketSessions {
  private readonly sessions = new Map<WebSocket, Session>();
  private readonly byKey = new Map<string, Set<Session>>();
  private readonly unsubscribe: Unsubscribe;
  private readonly timer: NodeJS.Timeout;
  private revalidating = false;

  constructor(private readonly options: SocketSessionsOptions) {
    this.unsubscribe = options.events.subscribe("keyRevocation", ({ keyId }) => this.endKey(keyId));
    this.timer = setInterval(() => void this.revalidate(), Math.max(options.revalidateMs, MIN_REVALIDATE_MS)).unref();
  }

  /**
   * Authenticates a socket's connection_init: true when it may go on. A bad
   * token is false (graphql-ws closes the socket with 4403); a key that
   * cannot be verified while the database is down gets the socket closed here
   * with 1013, and a key already holding its share of sockets with 4429.
   */
  async open(socket: WebSocket, authorization: unknown): Promise<boolean> {
    if (typeof authorization !== "string") return false;
    let principal: Principal;
    try {
      principal = await this.options.keys.authenticate(authorization);
    } catch (error) {
      if (error instanceof UnavailableError) socket.close(UNVERIFIABLE_CLOSE_CODE, "the key database is unreachable: try again later");
      return false;
    }
    const held = this.byKey.get(principal.keyId) ?? new Set<Session>();
    if (held.size >= this.options.maxSocketsPerKey) {
      socket.close(TOO_MANY_SOCKETS_CLOSE_CODE, `this API key already holds ${this.options.maxSocketsPerKey} sockets (MAX_SOCKETS_PER_KEY)`);
      return false;
    }
    const session = { socket, principal, authorization };
    this.sessions.set(socket, session);
    this.byKey.set(principal.keyId, held.add(session));
    return true;
  }

  /** The caller of an open socket; null once its key was found revoked (the socket is closing). */
  principalOf(socket: WebSocket): Principal | null {
    return this.sessions.get(socket)?.principal ?? null;
  }

  /** Forgets a socket once it has closed. */
  closed(socket: WebSocket): void {
    const session = this.sessions.get(socket);
    if (session !== undefined) this.forget(session);
  }

  /** Looks every open socket's key up in the database again (once per key), closing the sockets of keys no longer valid. */
  async revalidate(): Promise<void> {
    if (this.revalidating) return;
    this.revalidating = true;
    try {
      const byAuthorization = new Map<string, Session[]>();
      for (const session of this.sessions.values()) {
        const group = byAuthorization.get(session.authorization);
        if (group === undefined) byAuthorization.set(session.authorization, [session]);
        else group.push(session);
      }
      await Promise.all(
        [...byAuthorization].map(async ([authorization, sessions]) => {
          try {
            await this.options.keys.authenticate(authorization, { fresh: true });
          } catch (error) {
            // Anything else (a key database that cannot be reached) leaves the decision to the next round.
            if (error instanceof UnauthenticatedError) for (const session of sessions) this.end(session);
          }
        }),
      );
    } finally {
      this.revalidating = false;
    }
  }

  /** Stops listening for revocations and revalidating; the sockets themselves are closed by the server. */
  close(): void {
    this.unsubscribe();
    clearInterval(this.timer);
  }

  private endKey(keyId: string): void {
    const held = this.byKey.get(keyId);
    if (held === undefined) return;
    this.options.log.info({ keyId, sockets: held.size }, "closing the WebSockets of a revoked API key");
    for (const session of [...held]) this.end(session);
  }

  private end(session: Session): void {
    this.forget(session);
    session.socket.close(REVOKED_CLOSE_CODE, "Forbidden: the API key was revoked");
  }

  private forget(session: Session): void {
    this.sessions.delete(session.socket);
    const held = this.byKey.get(session.principal.keyId);
    held?.delete(session);
    if (held?.size === 0) this.byKey.delete(session.principal.keyId);
  }
}
