/**
 * The Node transport (an undici Pool) when connecting to Floodgate
 * hangs: a full accept queue, a firewall dropping SYNs, a host gone from the
 * network. The check is decided at its deadline; close() must not then wait
 * on the connection attempt the check already gave up (undici's connect
 * timeout, 10 s).
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { FloodgateClient, type FetchFunction } from "floodgate/client";

const undo: (() => void)[] = [];
afterEach(() => {
  for (const step of undo.splice(0)) step();
});

/**
 * A port whose connections hang: a socket listening with a backlog of 0 that
 * never accepts (Node always accepts, hence Python), its one queued slot
 * taken, so that the kernel drops every further SYN.
 */
async function hangingPort(): Promise<number> {
  const listener: ChildProcess = spawn("python3", ["-u", "-c", 'import socket,sys,time\ns=socket.socket();s.bind(("127.0.0.1",0));s.listen(0)\nprint(s.getsockname()[1])\nsys.stdin.read()'], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  undo.push(() => listener.kill());
  const port = await new Promise<number>((resolve, reject) => {
    listener.once("error", reject);
    createInterface({ input: listener.stdout! }).once("line", (line) => resolve(Number(line)));
  });
  const filler: Socket = connect(port, "127.0.0.1");
  filler.on("error", () => undefined);
  undo.push(() => filler.destroy());
  await new Promise<void>((resolve) => filler.once("connect", () => resolve()));
  // A connection that completes now would make this no hanging port.
  const probe = connect(port, "127.0.0.1");
  probe.on("error", () => undefined);
  const connected = await Promise.race([new Promise<boolean>((resolve) => probe.once("connect", () => resolve(true))), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 300))]);
  probe.destroy();
  if (connected) throw new Error("the port's connections do not hang here");
  return port;
}

async function settledWithin<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | "still pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise.then((value) => ({ value })), new Promise<"still pending">((resolve) => (timer = setTimeout(() => resolve("still pending"), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Node accepts every connection it can, so a port whose connections hang is made by python3 (Debian's, on the project's machines); without it the case is skipped, saying so. */
const hasPython = spawnSync("python3", ["--version"]).status === 0;

describe.runIf(hasPython)("FloodgateClient, connecting to Floodgate hangs (needs python3)", () => {
  it("decides the check at its deadline, and close() then returns without waiting for the abandoned connection attempt", async () => {
    const port = await hangingPort();
    const client = new FloodgateClient({ url: `http://127.0.0.1:${port}/graphql`, token: "any-token", timeoutMs: 300, cache: false, failureMode: "CLOSED" });
    const decided = await settledWithin(client.check({ tenantId: "acme", userId: "u1" }), 5_000);
    expect(decided).toMatchObject({ value: { allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" } });
    expect(client.stats().outages.timeouts).toBe(1);
    // Nothing is in flight: every check is decided. undici's Pool.close() waits for its queued request until its connect timeout (10 s).
    expect(await settledWithin(client.close(), 5_000)).toEqual({ value: undefined });
  }, 30_000);
});

describe("FloodgateClient over a fetch function that does not heed its AbortSignal", () => {
  // A wrapper that drops init.signal (tracing, retries), or a runtime's fetch whose body read ignores it.
  const neverAnswers: FetchFunction = () => new Promise(() => undefined);
  const bodyNeverEnds: FetchFunction = async () => ({ status: 200, text: () => new Promise<string>(() => undefined) });

  for (const [what, fetch] of [
    ["no answer", neverAnswers],
    ["a body that never ends", bodyNeverEnds],
  ] as const) {
    it(`decides a check at its deadline all the same: ${what}`, async () => {
      const client = new FloodgateClient({ url: "http://floodgate.invalid/graphql", token: "any-token", timeoutMs: 200, cache: false, failureMode: "CLOSED", fetch });
      undo.push(() => void client.close());
      const decided = await settledWithin(client.check({ tenantId: "acme", userId: "u1" }), 5_000);
      expect(decided).toMatchObject({ value: { allowed: false, degraded: true, source: "CLIENT_FAILURE_MODE" } });
      expect(client.stats().outages.timeouts).toBe(1);
    });
  }
});
