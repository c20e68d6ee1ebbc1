import type { Server, ServerResponse } from "node:http";
import type { Logger } from "./logger.js";

/** What closes beside the HTTP server: graphql-ws while requests drain, Apollo once they have. */
export interface ClosedWithServer {
  subscriptions: { close(): Promise<void> };
  apollo: { stop(): Promise<void> };
}

/**
 * The HTTP server's graceful shutdown: it stops accepting first; requests in
 * flight finish, idle keep-alive connections close, and connections still busy
 * at the deadline are closed.
 */
export class GracefulShutdown {
  private closing = false;

  constructor(
    /** How long requests in flight may run on before their connections are closed. */
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /** Once shutting down, every response ends its connection, so keep-alive cannot hold the shutdown open. */
  stopKeepAliveIfClosing(res: ServerResponse): void {
    if (this.closing) res.shouldKeepAlive = false;
  }

  async close(server: Server, { subscriptions, apollo }: ClosedWithServer): Promise<void> {
    this.closing = true;
    const drained = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await subscriptions.close();
    const deadline = setTimeout(() => {
      this.logger.warn({ timeoutMs: this.timeoutMs }, "requests still running at the shutdown deadline: closing their connections");
      server.closeAllConnections();
    }, this.timeoutMs);
    await drained;
    clearTimeout(deadline);
    await apollo.stop();
  }
}
