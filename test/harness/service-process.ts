/**
 * The service as its own process, started as `npm start` would start it but
 * from the sources (tsx), on embedded in-memory storage: for what only a real
 * process shows (signals, exit codes, what the process does while idle).
 */

import { spawn, type ChildProcess } from "node:child_process";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Starts the service on `port` and resolves once /readyz answers 200; kills it if that takes over 30 s. */
export async function startServiceProcess(port: number, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: "memory://", LOG_LEVEL: "error", ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return child;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("the service did not start");
}
