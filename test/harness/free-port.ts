import { createServer } from "node:net";

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now: one the OS picks,
 * or the one asked for (rejects when it is taken).
 */
export function freePort(port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(port, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
