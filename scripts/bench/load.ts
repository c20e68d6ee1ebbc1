/**
 * The load generator: autocannon on loopback, closed loop, a fixed number of
 * connections each sending the next body as soon as its answer arrives.
 * autocannon's own histogram keeps whole milliseconds, too coarse for a
 * sub-millisecond p99, so every response time is recorded here at full
 * resolution (latencies.ts) and the percentiles are computed exactly.
 */

import autocannon from "autocannon";
import { Latencies } from "./latencies.js";

export interface LoadResult {
  /** Requests answered 2xx per second. */
  requestsPerSecond: number;
  /** Milliseconds. */
  p50: number;
  p99: number;
  p999: number;
  requests: number;
  failures: number;
}

export interface DriveOptions {
  url: string;
  connections: number;
  seconds: number;
  bodies: readonly string[];
  /** Sent with every request, as a client would (Floodgate's Authorization). */
  headers?: Record<string, string>;
}

export async function drive(options: DriveOptions): Promise<LoadResult> {
  const { bodies } = options;
  let next = 0;
  const latencies = new Latencies();
  let finished: (result: autocannon.Result) => void = () => {};
  let failed: (error: unknown) => void = () => {};
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finished = resolve;
    failed = reject;
  });
  const instance = autocannon(
    {
    url: options.url,
    connections: options.connections,
    duration: options.seconds,
    method: "POST",
    headers: { "content-type": "application/json", ...options.headers },
    requests: [
      {
        setupRequest: (request) => {
          request.body = bodies[next++ % bodies.length]!;
          return request;
        },
      },
    ],
    },
    (error: unknown, result: autocannon.Result) => (error ? failed(error) : finished(result)),
  );
  instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode < 300) latencies.record(responseTime);
  });
  const result = await done;
  return {
    requestsPerSecond: latencies.count / result.duration,
    ...latencies.percentiles(),
    requests: latencies.count,
    failures: result.non2xx + result.errors + result.timeouts,
  };
}
