/**
 * A redis-server of the test's own on a spare port, for tests that must kill,
 * restart or slow down Redis. Always stop() it, also when the test fails.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./free-port.js";

export interface OwnRedisOptions {
  /** More redis-server arguments (--requirepass, --user …). */
  args?: string[];
  /** Serve TLS only, on the port (PEM files; the CA verifies client certificates, which `authClients` requires). */
  tls?: { cert: string; key: string; ca: string; authClients: boolean };
}

export interface OwnRedis {
  port: number;
  /** redis://127.0.0.1:<port>, or rediss:// when it serves TLS. */
  url: string;
  /** Kills the server (SIGKILL), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startOwnRedis(options: OwnRedisOptions = {}): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "floodgate-redis-"));
  const { tls } = options;
  const listen = tls
    ? ["--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key, "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", tls.authClients ? "yes" : "no"]
    : ["--port", String(port)];
  let child: ChildProcess | null = null;
  const start = async () => {
    child = spawn("redis-server", [...listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...(options.args ?? [])], {
      stdio: "ignore",
    });
    await waitForPort(port, true);
  };
  const kill = async () => {
    const running = child;
    child = null;
    if (running === null || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGKILL");
    await exited;
    await waitForPort(port, false);
  };
  await start();
  return {
    port,
    url: `${tls ? "rediss" : "redis"}://127.0.0.1:${port}`,
    kill,
    restart: start,
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once the port accepts connections (open) or refuses them (not open), polling every 50 ms up to timeoutMs. */
export async function waitForPort(port: number, open: boolean, timeoutMs = 5_000): Promise<void> {
  for (let attempt = 0; attempt < timeoutMs / 50; attempt++) {
    const isOpen = await new Promise<boolean>((resolve) => {
      const socket = connect({ port, host: "127.0.0.1" });
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (isOpen === open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server on port ${port} did not ${open ? "start" : "stop"}`);
}
