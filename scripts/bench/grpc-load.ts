/**
 * The gRPC load generator: one grpc-js channel to Floodgate's Envoy rate
 * limit service (GRPC_PORT), as one Envoy holds, with `streams` calls in
 * flight at all times, each sending the next request as soon as its answer
 * arrives (closed loop, like autocannon's connections). Each request is one
 * descriptor carrying what the GraphQL single check carries (user, IP, path,
 * method), so both rows decide the same rules.
 */

import { credentials, Metadata, type Client, type ServiceError } from "@grpc/grpc-js";
import { loadProtos, serviceOf } from "../../src/server/grpc-server.js";
import type { LoadResult } from "./load.js";
import { Latencies } from "./latencies.js";
import type { Caller } from "./workload.js";

export interface GrpcDriveOptions {
  address: string;
  token: string;
  /** The Envoy domain: the tenant of the same name. */
  domain: string;
  streams: number;
  seconds: number;
  callers: readonly Caller[];
}

type ShouldRateLimit = (request: unknown, metadata: Metadata, callback: (error: ServiceError | null, response: { overall_code: string }) => void) => void;

export function descriptorOf(c: Caller) {
  return {
    entries: [
      { key: "user_id", value: c.userId },
      { key: "remote_address", value: c.ip },
      { key: "path", value: c.resource },
      { key: "method", value: c.method },
    ],
  };
}

export async function driveGrpc(options: GrpcDriveOptions): Promise<LoadResult> {
  const RateLimitService = serviceOf(loadProtos(), "envoy.service.ratelimit.v3.RateLimitService");
  const client = new RateLimitService(options.address, credentials.createInsecure()) as unknown as Client & { ShouldRateLimit: ShouldRateLimit };
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${options.token}`);
  const requests = options.callers.map((c) => ({ domain: options.domain, descriptors: [descriptorOf(c)] }));
  const latencies = new Latencies();
  let next = 0;
  let failures = 0;
  const started = performance.now();
  const endAt = started + options.seconds * 1000;
  const stream = async () => {
    while (performance.now() < endAt) {
      const sent = performance.now();
      const ok = await new Promise<boolean>((resolve) => client.ShouldRateLimit(requests[next++ % requests.length], metadata, (error) => resolve(error === null)));
      if (ok) latencies.record(performance.now() - sent);
      else failures++;
    }
  };
  try {
    await Promise.all(Array.from({ length: options.streams }, stream));
  } finally {
    client.close();
  }
  const seconds = (performance.now() - started) / 1000;
  return { requestsPerSecond: latencies.count / seconds, ...latencies.percentiles(), requests: latencies.count, failures };
}
