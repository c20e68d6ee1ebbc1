/**
 * Two instances sharing one Postgres and one Redis key prefix, for a suite
 * that changes something through one and watches the other: started and
 * warmed up before the suite, stopped after it, when the times the suite
 * measured (pushed to the returned list) are printed.
 */

import { afterAll, beforeAll } from "vitest";
import type { TestApp } from "../harness/in-process-app.js";
import { warmUp } from "./api.js";
import { startTestApps } from "./app.js";

export function useTwoInstances(started: (apps: [TestApp, TestApp]) => void): string[] {
  const measured: string[] = [];
  let stopFleet: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const fleet = await startTestApps(2);
    stopFleet = fleet.stop;
    await warmUp(fleet.apps);
    started(fleet.apps as [TestApp, TestApp]);
  });
  afterAll(async () => {
    await stopFleet?.();
    if (measured.length > 0) console.log(`measured on this machine:\n  ${measured.join("\n  ")}`);
  });
  return measured;
}
