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
const options = { url: process.env.FLOODGATE_URL!, token: process.env.FLOODGATE_TOKEN!, timeoutMs: 5_000 };
const client = new FloodgateClient(options);
// The same client sending each batch as one request, for the row that shows what parallel requests buy.
const oneRequestABatch = new FloodgateClient({ ...options, batch: { parallel: 1 } });

const normal = (i: number) => checkInput(TENANT, CALLERS[i % CALLERS.length]!);
const WORKLOADS: Record<ClientWorkload, { client: FloodgateClient; requestOf: (i: number) => CheckRequest }> = {
  normal: { client, requestOf: normal },
  "normal, one request a batch": { client: oneRequestABatch, requestOf: normal },
  attack: { client, requestOf: () => checkInput(ATTACK_TENANT, ATTACKER) },
};

function send(message: DriverMessage): void {
  process.send!(message);
}

async function run({ workload, callers, seconds }: ClientRun): Promise<ClientRunResult> {
  const { client, requestOf } = WORKLOADS[workload];
  const before = client.stats();
  const cpuBefore = process.cpuUsage();
  const load = await driveClient({ client, callers, seconds, requestOf });
  const cpu = process.cpuUsage(cpuBefore);
  const after = client.stats();
  const batches = after.batches - before.batches;
  const batchedChecks = after.meanBatchSize * after.batches - before.meanBatchSize * before.batches;
  return {
    load,
    batches,
    meanBatchSize: batches === 0 ? 0 : batchedChecks / batches,
    refusalCacheAnswers: after.decisions.refusalCache - before.decisions.refusalCache,
    cpuUsPerCheck: (cpu.user + cpu.system) / (load.requests + load.failures),
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
process.on("disconnect", () => void Promise.all([client.close(), oneRequestABatch.close()]));
cacheLive().then(
  () => send({ ready: true }),
  (error: unknown) => send({ error: String(error) }),
);
