/**
 * A TCP proxy the test can cut: stop() drops every connection and refuses new
 * ones, as a network partition or a dead database would look from the
 * service; start() lets traffic through again on the same port. answer(false)
 * keeps it listening but holds each new connection unanswered, as a server
 * too busy to answer or a half-dead balancer would; answer(true) forwards new
 * connections again.
 */

import { createServer, connect, type Server, type Socket } from "node:net";
import { freePort } from "./free-port.js";

export interface TcpProxy {
  port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  answer(forward: boolean): void;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let forwarding = true;
  const start = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        if (!forwarding) {
          sockets.add(client);
          client.on("close", () => sockets.delete(client));
          client.on("error", () => client.destroy());
          return;
        }
        const upstream = connect({ host: targetHost, port: targetPort });
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on("close", () => sockets.delete(socket));
          socket.on("error", () => socket.destroy());
        }
        client.pipe(upstream).pipe(client);
        upstream.on("close", () => client.destroy());
        client.on("close", () => upstream.destroy());
      });
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve());
    });
  await start();
  return {
    port,
    start,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      const running = server;
      server = null;
      if (running) await new Promise<void>((resolve) => running.close(() => resolve()));
    },
    answer: (forward) => {
      forwarding = forward;
    },
  };
}
