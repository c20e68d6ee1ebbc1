/**
 * A gRPC client of Floodgate's Envoy rate limit service, built from the
 * .proto files under proto/ (as any client generated from Envoy's API would
 * be), and a raw one that sends bytes encoded by hand and returns the bytes of
 * the answer, for proving the wire format independently of those files.
 */

import { credentials as grpcCredentials, Metadata, status as grpcStatus, type ChannelCredentials, type Client, type ClientReadableStream, type ServiceError } from "@grpc/grpc-js";
import { loadProtos, RATE_LIMIT_METHOD, serviceOf } from "../../src/server/grpc-server.js";

export interface Entry {
  key: string;
  value: string;
}

export interface DescriptorInput {
  entries: Entry[];
  limit?: { requests_per_unit: number; unit: string };
  hits_addend?: { value: number };
}

export interface RateLimitRequestInput {
  domain: string;
  descriptors: DescriptorInput[];
  hits_addend?: number;
}

export interface DescriptorStatus {
  code: "OK" | "OVER_LIMIT";
  current_limit: { name: string; requests_per_unit: number; unit: string } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: string; nanos: number } | null;
}

export interface RateLimitResponse {
  overall_code: "OK" | "OVER_LIMIT";
  statuses: DescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
  request_headers_to_add: { key: string; value: string }[];
  raw_body: Buffer;
}

type Callback<T> = (error: ServiceError | null, response: T) => void;
type UnaryMethod<Req, Res> = (request: Req, metadata: Metadata, options: { deadline?: Date }, callback: Callback<Res>) => void;

export interface EnvoyClient {
  shouldRateLimit(request: RateLimitRequestInput, options?: { token?: string | null; deadlineMs?: number }): Promise<RateLimitResponse>;
  health(service: string): Promise<{ status: string }>;
  /** grpc.health.v1 Watch: the first status it sends, then the stream is cancelled. */
  watchHealth(service: string): Promise<{ status: string }>;
  /** Sends the bytes as a RateLimitRequest and returns the answer's bytes. */
  raw(bytes: Buffer, token: string): Promise<Buffer>;
  close(): void;
}

export function envoyClient(address: string, token: string, channel: ChannelCredentials = grpcCredentials.createInsecure()): EnvoyClient {
  const protos = loadProtos();
  const RateLimitService = serviceOf(protos, "envoy.service.ratelimit.v3.RateLimitService");
  const Health = serviceOf(protos, "grpc.health.v1.Health");
  const rls = new RateLimitService(address, channel) as unknown as Client & { ShouldRateLimit: UnaryMethod<RateLimitRequestInput, RateLimitResponse> };
  const health = new Health(address, channel) as unknown as Client & {
    Check: UnaryMethod<{ service: string }, { status: string }>;
    Watch: (request: { service: string }) => ClientReadableStream<{ status: string }>;
  };
  const metadataFor = (secret: string | null) => {
    const metadata = new Metadata();
    if (secret !== null) metadata.set("authorization", `Bearer ${secret}`);
    return metadata;
  };
  const unary = <Req, Res>(method: UnaryMethod<Req, Res>, target: Client, request: Req, metadata: Metadata, deadlineMs?: number) =>
    new Promise<Res>((resolve, reject) =>
      method.call(target, request, metadata, deadlineMs === undefined ? {} : { deadline: new Date(Date.now() + deadlineMs) }, (error, response) => (error ? reject(error) : resolve(response))),
    );
  return {
    shouldRateLimit: (request, options = {}) => unary(rls.ShouldRateLimit, rls, request, metadataFor(options.token === undefined ? token : options.token), options.deadlineMs),
    health: (service) => unary(health.Check, health, { service }, new Metadata()),
    watchHealth: (service) =>
      new Promise((resolve, reject) => {
        const stream = health.Watch({ service });
        stream.once("data", (status: { status: string }) => {
          resolve(status);
          stream.cancel();
        });
        stream.once("error", (error: ServiceError) => {
          if (error.code !== grpcStatus.CANCELLED) reject(error);
        });
      }),
    raw: (bytes, secret) =>
      new Promise<Buffer>((resolve, reject) =>
        rls.makeUnaryRequest(
          `/${RATE_LIMIT_METHOD}`,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          metadataFor(secret),
          (error: ServiceError | null, response?: Buffer) => (error ? reject(error) : resolve(response!)),
        ),
      ),
    close: () => {
      rls.close();
      health.close();
    },
  };
}
