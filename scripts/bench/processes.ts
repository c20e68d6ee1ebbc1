/**
 * The servers under test, each in a process of its own, so that each one's
 * CPU time can be read from /proc/<pid>/stat (user + system) around a run and
 * divided by the decisions it made.
 */

import { spawn, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

export interface ServerProcess {
  readonly name: string;
  readonly url: string;
  /** User plus system CPU time the process has used so far, in milliseconds. */
  cpuMs(): number;
  /**
   * Stops the process where it stands (SIGSTOP) while the bench measures
   * another: an idle server still wakes up (its timers, its periodic rule
   * reload), and on two cores those wakeups land in the measured server's
   * latencies.
   */
  pause(): void;
  /** Lets a paused process go on (SIGCONT), and waits until the work it owes (timers that came due while it was paused) is done. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/** The node flags `npm start` runs Floodgate with (package.json's start script, before dist/main.js). */
export function nodeFlagsOfStart(): string[] {
  const { scripts } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: { start: string } };
  const [node, ...words] = scripts.start.split(/\s+/);
  const main = words.indexOf("dist/main.js");
  const flags = words.slice(0, main);
  if (node !== "node" || main === -1 || !flags.every((flag) => flag.startsWith("--"))) throw new Error(`bench: cannot read the node flags of npm start (${scripts.start})`);
  return flags;
}

const TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
const READY_TIMEOUT_MS = 120_000;
/** A resumed process is settled once it spends under a tenth of a core over SETTLE_WINDOW_MS; it is given SETTLE_TIMEOUT_MS at most. */
const SETTLE_WINDOW_MS = 200;
const SETTLE_TIMEOUT_MS = 15_000;

export async function startServer(options: {
  name: string;
  args: string[];
  env: Record<string, string>;
  /** Where requests go. */
  url: string;
  /** Polled until it answers 200. */
  readyUrl: string;
}): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...profilingArgs(), ...options.args], {
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-4000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    await waitUntilReady(options.readyUrl, exited);
  } catch (error) {
    child.kill("SIGKILL");
    throw new Error(`${options.name} did not start: ${(error as Error).message}\n${output}`);
  }
  let paused = false;
  const cpuMs = () => processCpuMs(child.pid!);
  const resume = async () => {
    if (!paused || child.exitCode !== null) return;
    child.kill("SIGCONT");
    paused = false;
    await settled(cpuMs);
  };
  return {
    name: options.name,
    url: options.url,
    cpuMs,
    pause: () => {
      if (paused || child.exitCode !== null) return;
      child.kill("SIGSTOP");
      paused = true;
    },
    resume,
    stop: async () => {
      if (child.exitCode !== null) return;
      // A stopped process keeps a SIGTERM pending until it runs again.
      if (paused) child.kill("SIGCONT");
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Waits until a process spends under a tenth of a core over SETTLE_WINDOW_MS (CPU time read by `cpuMs`), or SETTLE_TIMEOUT_MS has passed. */
async function settled(cpuMs: () => number): Promise<void> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let before = cpuMs();
  do {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_WINDOW_MS));
    const now = cpuMs();
    if (now - before < SETTLE_WINDOW_MS / 10) return;
    before = now;
  } while (Date.now() < deadline);
}

/** Polls `url` until it answers 200; throws when the process exits first or `timeoutMs` passes. */
export async function waitUntilReady(url: string, exited: Promise<unknown>, timeoutMs = READY_TIMEOUT_MS): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (gone) throw new Error("the process exited");
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs / 1000} s`);
}

/**
 * BENCH_PROFILE_DIR: every process the bench starts (servers and the client)
 * writes a V8 CPU profile there when it exits (node --cpu-prof), to read
 * where a row's time goes; NODE_OPTIONS may not carry --cpu-prof.
 */
export function profilingArgs(): string[] {
  const dir = process.env.BENCH_PROFILE_DIR;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

/** User plus system CPU time of any process of this machine so far, in milliseconds: utime and stime are fields 14 and 15 of /proc/<pid>/stat, counted after the ")" that ends the command name. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

/**
 * The CPU time the Redis behind `info` (its INFO SERVER text) has used so
 * far, when it runs on this machine (its process_id is a redis-server here);
 * null for a Redis elsewhere, whose CPU this machine cannot see.
 */
export function localRedisCpu(info: string): (() => number) | null {
  const pid = Number(/^process_id:(\d+)/m.exec(info)?.[1]);
  if (!Number.isInteger(pid)) return null;
  try {
    if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("redis-server")) return null;
  } catch {
    return null;
  }
  return () => processCpuMs(pid);
}
