/**
 * The gRPC listener (GRPC_PORT): Envoy's rate limit service
 * (src/api/envoy/rate-limit-service.ts) and grpc.health.v1, from the .proto
 * files under proto/, optionally over TLS. Every call is counted by method
 * and status code. Shutting down refuses new calls, lets those in flight
 * finish for up to the shutdown timeout, then cancels the rest.
 */

import { fileURLToPath } from "node:url";
import { loadSync, type Options } from "@grpc/proto-loader";
import { loadPackageDefinition, Server, ServerCredentials, status, type GrpcObject, type ServiceClientConstructor, type ServiceError, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData } from "@grpc/grpc-js";
import type { RateLimitService } from "../api/envoy/rate-limit-service.js";
import type { RateLimitRequestMessage } from "../api/envoy/descriptors.js";
import { ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from "../domain/errors.js";
import type { Logger } from "./logger.js";

/** Where the .proto files are, from src/server and from dist/server alike. */
export const PROTO_ROOT = fileURLToPath(new URL("../../proto/", import.meta.url));

/** How the listener decodes messages: field names as in the .proto, 64-bit integers and enums as strings, absent fields as their defaults (messages null). */
export const PROTO_OPTIONS: Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT] };

export const RATE_LIMIT_METHOD = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
export const HEALTH_CHECK_METHOD = "grpc.health.v1.Health/Check";
export const HEALTH_WATCH_METHOD = "grpc.health.v1.Health/Watch";
/** The service names grpc.health.v1 answers for: "" is the whole server. */
const HEALTH_SERVICES = new Set(["", "envoy.service.ratelimit.v3.RateLimitService"]);

/** The gRPC packages of the .proto files, loaded once. */
export function loadProtos(): GrpcObject {
  const definition = loadSync(["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"], PROTO_OPTIONS);
  return loadPackageDefinition(definition);
}

/** A service of the loaded packages by its full name ("grpc.health.v1.Health"). */
export function serviceOf(protos: GrpcObject, fullName: string): ServiceClientConstructor {
  let node: unknown = protos;
  for (const part of fullName.split(".")) node = (node as Record<string, unknown>)[part];
  return node as ServiceClientConstructor;
}

export interface GrpcServerOptions {
  rateLimits: RateLimitService;
  /** Whether the service can decide (its rules are loaded): what the health service says. */
  ready: () => boolean;
  tls: { cert: string; key: string } | null;
  shutdownTimeoutMs: number;
  /** MAX_BODY_BYTES: the largest message accepted (larger: RESOURCE_EXHAUSTED, before it is decoded). */
  maxMessageBytes: number;
  /** Told of every call: its method, its status code's name, and how long it took. */
  onCall: (method: string, code: string, seconds: number) => void;
  logger: Logger;
}

export interface RunningGrpcServer {
  /** "host:port" as bound. */
  address: string;
  close(): Promise<void>;
}

const CODE_NAMES = Object.fromEntries(Object.entries(status).filter(([, v]) => typeof v === "number").map(([k, v]) => [v, k])) as Record<number, string>;

export async function startGrpcServer(options: GrpcServerOptions, port: number, host: string): Promise<RunningGrpcServer> {
  const protos = loadProtos();
  const server = new Server({ "grpc.max_receive_message_length": options.maxMessageBytes });
  const watchers = new Set<ServerWritableStream<unknown, unknown>>();
  let closing = false;
  const { logger, onCall } = options;

  /** Runs a unary handler, answering its result or its error as a status, and counts the call. */
  const unary =
    <Req, Res>(method: string, handle: (call: ServerUnaryCall<Req, Res>) => Promise<Res>) =>
    (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      const started = performance.now();
      handle(call).then(
        (response) => {
          onCall(method, "OK", (performance.now() - started) / 1000);
          callback(null, response);
        },
        (error: unknown) => {
          const failure = statusOf(error);
          if (failure.code === status.INTERNAL) logger.error({ err: error, method }, "gRPC call failed");
          onCall(method, CODE_NAMES[failure.code] ?? String(failure.code), (performance.now() - started) / 1000);
          callback(failure);
        },
      );
    };

  const servingStatus = (service: string): string => {
    if (!HEALTH_SERVICES.has(service)) throw new NotFoundError("service", service.slice(0, 200));
    return !closing && options.ready() ? "SERVING" : "NOT_SERVING";
  };

  server.addService(serviceOf(protos, "envoy.service.ratelimit.v3.RateLimitService").service, {
    ShouldRateLimit: unary<RateLimitRequestMessage, unknown>(RATE_LIMIT_METHOD, (call) => {
      const [authorization] = call.metadata.get("authorization");
      return options.rateLimits.shouldRateLimit(typeof authorization === "string" ? authorization : undefined, call.request, deadlineMs(call.getDeadline()));
    }),
  });
  server.addService(serviceOf(protos, "grpc.health.v1.Health").service, {
    Check: unary<{ service: string }, { status: string }>(HEALTH_CHECK_METHOD, async (call) => ({ status: servingStatus(call.request.service) })),
    // The current status, then the stream stays open until the server shuts down (a status change of its own is not pushed).
    Watch: (call: ServerWritableStream<{ service: string }, { status: string }>) => {
      onCall(HEALTH_WATCH_METHOD, "OK", 0);
      try {
        call.write({ status: servingStatus(call.request.service) });
      } catch (error) {
        call.emit("error", statusOf(error));
        return;
      }
      watchers.add(call as ServerWritableStream<unknown, unknown>);
      call.on("cancelled", () => watchers.delete(call as ServerWritableStream<unknown, unknown>));
    },
  });

  const credentials = options.tls ? ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(options.tls.cert), private_key: Buffer.from(options.tls.key) }], false) : ServerCredentials.createInsecure();
  const bindHost = host.includes(":") ? `[${host}]` : host;
  const boundPort = await new Promise<number>((resolve, reject) => server.bindAsync(`${bindHost}:${port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))));
  return {
    address: `${host === "0.0.0.0" || host === "::" ? "localhost" : host}:${boundPort}`,
    close: async () => {
      closing = true;
      for (const watcher of watchers) watcher.end();
      watchers.clear();
      const deadline = setTimeout(() => {
        logger.warn({ timeoutMs: options.shutdownTimeoutMs }, "gRPC calls still running at the shutdown deadline: cancelling them");
        server.forceShutdown();
      }, options.shutdownTimeoutMs);
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      clearTimeout(deadline);
    },
  };
}

/** A gRPC deadline (a Date, or milliseconds since the epoch, Infinity for none) in milliseconds since the epoch. */
function deadlineMs(deadline: Date | number): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** The domain's errors as gRPC statuses; anything else is INTERNAL with no detail (the log has it). */
function statusOf(error: unknown): Partial<ServiceError> & { code: status } {
  const details = (code: status, message: string) => ({ code, details: message, message });
  if (error instanceof ValidationError) return details(status.INVALID_ARGUMENT, error.message);
  if (error instanceof UnauthenticatedError) return details(status.UNAUTHENTICATED, error.message);
  if (error instanceof ForbiddenError) return details(status.PERMISSION_DENIED, error.message);
  if (error instanceof UnavailableError) return details(status.UNAVAILABLE, error.message);
  if (error instanceof NotFoundError) return details(status.NOT_FOUND, error.message);
  return details(status.INTERNAL, "internal error");
}
