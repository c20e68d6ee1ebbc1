/**
 * The client's load: concurrent callers in one process, each awaiting
 * `client.check` on its next request as soon as its previous check is
 * answered, for a number of seconds (a closed loop, like autocannon's
 * connections). Each check is timed around its await, at full resolution.
 *
 * A check counts when Floodgate decided it, over the network or through the
 * client's refusal cache. One that threw or that the client's failure mode
 * decided (Floodgate not asked in time) is a failure, as a non-2xx answer is
 * in autocannon's rows, so a client that answers fast without Floodgate
 * cannot win.
 */

import type { CheckRequest, FloodgateClient } from "floodgate/client";
import { Latencies } from "./latencies.js";
import type { LoadResult } from "./load.js";

export interface ClientLoadOptions {
  client: FloodgateClient;
  callers: number;
  seconds: number;
  /** The i-th check of the run. */
  requestOf(i: number): CheckRequest;
}

export async function driveClient(options: ClientLoadOptions): Promise<LoadResult> {
  const { client, requestOf } = options;
  const latencies = new Latencies();
  let failures = 0;
  let next = 0;
  const startedAt = performance.now();
  const endAt = startedAt + options.seconds * 1000;
  const callerLoop = async () => {
    while (performance.now() < endAt) {
      const sentAt = performance.now();
      const decided = await client.check(requestOf(next++)).then(
        (decision) => decision.source !== "CLIENT_FAILURE_MODE",
        () => false,
      );
      if (decided) latencies.record(performance.now() - sentAt);
      else failures++;
    }
  };
  await Promise.all(Array.from({ length: options.callers }, callerLoop));
  const elapsedSeconds = (performance.now() - startedAt) / 1000;
  return { requestsPerSecond: latencies.count / elapsedSeconds, ...latencies.percentiles(), requests: latencies.count, failures };
}
