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
  /** One server, or several sharing the connections evenly (instances behind a balancer). */
  url: string | readonly string[];
  connections: number;
  seconds: number;
  bodies: readonly string[];
  /** Sent with every request, as a client would (Floodgate's Authorization). */
  headers?: Record<string, string>;
}

export async function drive(options: DriveOptions): Promise<LoadResult> {
  const urls = typeof options.url === "string" ? [options.url] : options.url;
  if (options.connections % urls.length !== 0) throw new Error(`bench: ${options.connections} connections do not split evenly over ${urls.length} servers`);
  const { bodies } = options;
  let next = 0;
  const latencies = new Latencies();
  const results = await Promise.all(
    urls.map(
      (url) =>
        new Promise<autocannon.Result>((resolve, reject) => {
          const instance = autocannon(
            {
              url,
              connections: options.connections / urls.length,
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
            (error: unknown, result: autocannon.Result) => (error ? reject(error) : resolve(result)),
          );
          instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
            if (statusCode >= 200 && statusCode < 300) latencies.record(responseTime);
          });
        }),
    ),
  );
  const duration = Math.max(...results.map((r) => r.duration));
  return {
    requestsPerSecond: latencies.count / duration,
    ...latencies.percentiles(),
    requests: latencies.count,
    failures: results.reduce((sum, r) => sum + r.non2xx + r.errors + r.timeouts, 0),
  };
}
