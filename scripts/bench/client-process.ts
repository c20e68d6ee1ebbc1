/**
 * The client process of `npm run bench`: scripts/bench/client-driver.ts in a
 * process of its own, so that the client's CPU is neither the load
 * generator's nor the server's, as for a backend on another machine. The
 * bench sends it one run at a time over Node's IPC channel and gets back the
 * run's figures.
 */

import { spawn } from "node:child_process";
import type { LoadResult } from "./load.js";
import { profilingArgs } from "./processes.js";

/**
 * normal: the single-check scenario's callers; "normal, one request a batch": the same through a
 * client with batch.parallel 1; attack: every caller as the attacker, far over its limit.
 */
export type ClientWorkload = "normal" | "normal, one request a batch" | "attack";

export interface ClientRun {
  workload: ClientWorkload;
  callers: number;
  seconds: number;
}

export interface ClientRunResult {
  load: LoadResult;
  /** Requests the client sent with checks in this run, their mean size, and the checks its refusal cache answered. */
  batches: number;
  meanBatchSize: number;
  refusalCacheAnswers: number;
  /** The client process's own CPU (user + system) over the run, per check: its share of the machine, which the server's column leaves out. */
  cpuUsPerCheck: number;
}

/** What the driver sends: "ready" once its refusal cache is live, then one result per run, or why it could not. */
export type DriverMessage = { ready: true } | { result: ClientRunResult } | { error: string };

export interface ClientProcess {
  run(run: ClientRun): Promise<ClientRunResult>;
  stop(): Promise<void>;
}

export async function startClientDriver(options: { url: string; token: string }): Promise<ClientProcess> {
  const child = spawn(process.execPath, [...profilingArgs(), "--import", "tsx", "scripts/bench/client-driver.ts"], {
    env: { ...process.env, FLOODGATE_URL: options.url, FLOODGATE_TOKEN: options.token },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const nextMessage = () =>
    new Promise<DriverMessage>((resolve, reject) => {
      const gone = () => reject(new Error("the bench's client process exited"));
      child.once("exit", gone);
      child.once("message", (message) => {
        child.off("exit", gone);
        resolve(message as DriverMessage);
      });
    });
  const answer = async () => {
    const message = await nextMessage();
    if ("error" in message) throw new Error(`the bench's client process: ${message.error}`);
    return message;
  };
  await answer();
  return {
    run: async (run) => {
      child.send(run);
      const message = await answer();
      if (!("result" in message)) throw new Error(`the bench's client process answered ${JSON.stringify(message)}`);
      return message.result;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
