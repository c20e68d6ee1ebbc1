/**
 * The bench's client process (started by client-process.ts): one
 * FloodgateClient, the built floodgate/client as a backend installs it, at
 * FLOODGATE_URL with FLOODGATE_TOKEN. It says "ready" once the client's
 * refusal cache is live (its push channel listening), then runs each
 * ClientRun it is sent and answers with the figures, until the bench
 * disconnects.
 */

import { FloodgateClient, type CheckRequest } from "floodgate/client";
import { driveClient } from "./client-load.js";
import type { ClientRun, ClientRunResult, ClientWorkload, DriverMessage } from "./client-process.js";
import { ATTACK_TENANT, ATTACKER, CALLERS, checkInput, TENANT } from "./workload.js";

const CACHE_LIVE_TIMEOUT_MS = 10_000;

// The bench measures deciding, not the failure policy: a check slower than the default 100 ms
// deadline on a loaded machine must be waited for, not answered by failureMode.
const client = new FloodgateClient({ url: process.env.FLOODGATE_URL!, token: process.env.FLOODGATE_TOKEN!, timeoutMs: 5_000 });

const WORKLOADS: Record<ClientWorkload, (i: number) => CheckRequest> = {
  normal: (i) => checkInput(TENANT, CALLERS[i % CALLERS.length]!),
  attack: () => checkInput(ATTACK_TENANT, ATTACKER),
};

function send(message: DriverMessage): void {
  process.send!(message);
}

async function run({ workload, callers, seconds }: ClientRun): Promise<ClientRunResult> {
  const before = client.stats();
  const load = await driveClient({ client, callers, seconds, requestOf: WORKLOADS[workload] });
  const after = client.stats();
  const batches = after.batches - before.batches;
  const batchedChecks = after.meanBatchSize * after.batches - before.meanBatchSize * before.batches;
  return {
    load,
    batches,
    meanBatchSize: batches === 0 ? 0 : batchedChecks / batches,
    refusalCacheAnswers: after.decisions.refusalCache - before.decisions.refusalCache,
  };
}

async function cacheLive(): Promise<void> {
  const deadline = Date.now() + CACHE_LIVE_TIMEOUT_MS;
  while (client.stats().refusalCache?.live !== true) {
    if (Date.now() > deadline) throw new Error(`the refusal cache was not live within ${CACHE_LIVE_TIMEOUT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

process.on("message", (message) => {
  run(message as ClientRun).then(
    (result) => send({ result }),
    (error: unknown) => send({ error: String(error) }),
  );
});
process.on("disconnect", () => void client.close());
cacheLive().then(
  () => send({ ready: true }),
  (error: unknown) => send({ error: String(error) }),
);
