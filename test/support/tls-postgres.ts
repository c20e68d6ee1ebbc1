/**
 * A Postgres 15 of a test's own that takes connections over TLS only
 * (pg_hba: hostssl trust, hostnossl reject), in a temporary directory, on a
 * spare loopback port. Postgres refuses to run as root, so when the tests run
 * as root it runs as the postgres user (runuser), which then owns the
 * directory. stop() ends it by the pid in postmaster.pid and removes it all.
 */

import { execFileSync, spawn } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../harness/free-port.js";

const BIN = "/usr/lib/postgresql/15/bin";

export interface TlsPostgres {
  port: number;
  stop(): Promise<void>;
}

/** Whether this machine can run one: the binaries, and a postgres user when running as root. */
export function tlsPostgresAvailable(): boolean {
  if (!existsSync(join(BIN, "postgres")) || !existsSync(join(BIN, "initdb"))) return false;
  if (process.getuid?.() !== 0) return true;
  try {
    execFileSync("id", ["postgres"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export async function startTlsPostgres(certificate: { cert: string; key: string }): Promise<TlsPostgres> {
  const dir = mkdtempSync(join(tmpdir(), "floodgate-pg-tls-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  const run = (binary: string, args: string[]) => (asRoot ? ["runuser", ["-u", "postgres", "--", join(BIN, binary), ...args]] : [join(BIN, binary), args]) as [string, string[]];
  chmodSync(dir, 0o755);
  if (asRoot) execFileSync("chown", ["postgres", dir]);
  execFileSync(...run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync"]), { stdio: "ignore" });
  copyFileSync(certificate.cert, join(data, "server.crt"));
  copyFileSync(certificate.key, join(data, "server.key"));
  chmodSync(join(data, "server.key"), 0o600);
  writeFileSync(join(data, "pg_hba.conf"), ["local all all trust", "hostssl all all 127.0.0.1/32 trust", "hostnossl all all 127.0.0.1/32 reject", ""].join("\n"));
  if (asRoot) execFileSync("chown", ["-R", "postgres", data]);
  const port = await freePort();
  const [command, args] = run("postgres", ["-D", data, "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "ssl=on", "-c", "fsync=off"]);
  const child = spawn(command, args, { stdio: "ignore" });
  const postmasterPid = () => Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  try {
    await waitFor(() => postmasterReady(data), () => child.exitCode !== null);
  } catch (error) {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    stop: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      // Immediate shutdown: nothing here needs to survive.
      process.kill(postmasterPid(), "SIGQUIT");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Ready as pg_ctl -w reads it: the postmaster writes its status on the 8th
 * line of postmaster.pid, "ready" once it takes connections. A port that
 * accepts a TCP connection is not enough: while it starts up, the server
 * accepts and then refuses with "the database system is starting up".
 */
function postmasterReady(data: string): boolean {
  const pidFile = join(data, "postmaster.pid");
  if (!existsSync(pidFile)) return false;
  return readFileSync(pidFile, "utf8").split("\n")[7]?.trim() === "ready";
}

async function waitFor(ready: () => boolean | Promise<boolean>, exited: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (await ready()) return;
    if (exited()) throw new Error("postgres exited before accepting connections");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("postgres did not accept connections within 30 s");
}
