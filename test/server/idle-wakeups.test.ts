/**
 * An idle instance sleeps: with no request to answer, its main thread wakes
 * only for its own periodic work, a few dozen times a second at most, so an
 * idle fleet costs its hosts next to nothing. prom-client's default
 * event-loop sampling (every 10 ms) alone woke it 100 times a second.
 *
 * Counted by Linux's voluntary context switches of the main thread: each
 * time it waits for the event loop's next timer or socket, it gives up the
 * CPU once. A count, not a timing: a loaded machine delays the wakes but
 * does not add any.
 */

import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../harness/free-port.js";
import { startServiceProcess } from "../harness/service-process.js";

const MOST_WAKES_PER_SECOND = 40;

function mainThreadWakes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8");
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)![1]);
}

describe.runIf(existsSync("/proc/self/task"))("an idle instance", () => {
  let child: ChildProcess | null = null;
  afterEach(() => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });

  it(`wakes its main thread fewer than ${MOST_WAKES_PER_SECOND} times a second`, { timeout: 60_000 }, async () => {
    child = await startServiceProcess(await freePort(), {});
    // Past the start's own work (the first rule load, the dashboard's files).
    await new Promise((r) => setTimeout(r, 2000));
    const before = mainThreadWakes(child.pid!);
    const startedAt = performance.now();
    await new Promise((r) => setTimeout(r, 4000));
    const wakes = mainThreadWakes(child.pid!) - before;
    const seconds = (performance.now() - startedAt) / 1000;
    console.log(`idle instance: ${wakes} wakes of its main thread in ${seconds.toFixed(1)} s (${(wakes / seconds).toFixed(1)} a second)`);
    expect(wakes / seconds).toBeLessThan(MOST_WAKES_PER_SECOND);
  });
});
