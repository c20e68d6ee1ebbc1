/**
 * The gRPC listener's operations, on a Redis of the test's own: a caller's
 * deadline bounds the wait for a slow Redis (the rules' failure modes answer
 * in time), TLS when certificates are given, and shutdown with the HTTP server.
 */

import { credentials, status, type ServiceError } from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { createRedisClient } from "../../src/store/redis/client.js";
import { CreateRuleDocument } from "../generated/graphql.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { startOwnRedis, type OwnRedis } from "../harness/redis-server.js";
import { makeCertificates, type Certificates } from "../support/certificates.js";
import { sleep } from "../support/api.js";
import { envoyClient, type EnvoyClient, type RateLimitResponse } from "../support/envoy-client.js";
import { redisBinariesAvailable } from "../support/services.js";

const TENANT = "edge";

describe.runIf(await redisBinariesAvailable())("the gRPC listener's operations", () => {
  const adminToken = testAdminToken();
  let redis: OwnRedis;
  let certificates: Certificates;
  let app: App;
  let envoy: EnvoyClient;

  beforeAll(async () => {
    redis = await startOwnRedis();
    certificates = makeCertificates();
    app = await startApp(
      loadSettings({
        ADMIN_TOKEN: adminToken,
        PORT: "0",
        HOST: "127.0.0.1",
        DATA_DIR: "memory://",
        REDIS_URL: redis.url,
        // Longer than any caller here waits: the callers' deadlines are what bound the wait.
        REDIS_TIMEOUT_MS: "5000",
        GRPC_PORT: "0",
        GRPC_TLS_CERT_FILE: certificates.serverCert,
        GRPC_TLS_KEY_FILE: certificates.serverKey,
      }),
      { logger: pino({ level: "silent" }) },
    );
    const client = new GraphQLClient(app.url, adminToken);
    for (const failureMode of ["OPEN", "CLOSED"] as const) {
      await client.data(CreateRuleDocument, {
        input: { tenantId: TENANT, name: failureMode, resource: `/${failureMode.toLowerCase()}`, scope: ["IP"], limit: 100, window: 60, failureMode },
      });
    }
    envoy = envoyClient(app.grpcAddress!, adminToken, credentials.createSsl(readFileSync(certificates.ca)));
  });
  afterAll(async () => {
    envoy?.close();
    await app?.close();
    await redis?.stop();
    certificates?.remove();
  });

  const request = (path: string) => ({ domain: TENANT, descriptors: [{ entries: [{ key: "remote_address", value: "10.9.0.1" }, { key: "path", value: path }] }] });

  it("answers over TLS, verified by the CA that signed its certificate", async () => {
    expect((await envoy.shouldRateLimit(request("/open"))).statuses[0]).toMatchObject({ code: "OK", limit_remaining: 99 });
    const plaintext = envoyClient(app.grpcAddress!, adminToken);
    try {
      expect(((await plaintext.health("").catch((e: unknown) => e)) as ServiceError).code).toBe(status.UNAVAILABLE);
    } finally {
      plaintext.close();
    }
  });

  it("answers within the caller's deadline while Redis is stalled, each rule by its failure mode", async () => {
    await envoy.shouldRateLimit(request("/closed"));
    const admin = createRedisClient({ kind: "single", url: redis.url }, 5000);
    await admin.connect();
    try {
      await admin.call("CLIENT", "PAUSE", "3000", "ALL");
      // Well under REDIS_TIMEOUT_MS: without the caller's deadline these calls would wait for Redis and miss it.
      const closed = await envoy.shouldRateLimit(request("/closed"), { deadlineMs: 1000 });
      const open = await envoy.shouldRateLimit(request("/open"), { deadlineMs: 1000 });
      expect(closed.overall_code).toBe("OVER_LIMIT");
      expect(open.overall_code).toBe("OK");
    } finally {
      admin.disconnect();
    }
  });

  it("stops with the HTTP server: a call in flight is answered, then the listener refuses calls", async () => {
    const admin = createRedisClient({ kind: "single", url: redis.url }, 5000);
    await admin.connect();
    let inFlight: Promise<RateLimitResponse>;
    try {
      await admin.call("CLIENT", "PAUSE", "1000", "ALL");
      // Waits for Redis (REDIS_TIMEOUT_MS is 5 s, and the call has no deadline): still running when the app is closed.
      inFlight = envoy.shouldRateLimit(request("/open"));
      await sleep(200);
    } finally {
      admin.disconnect();
    }
    await app.close();
    const answered = (await inFlight).statuses[0]!;
    // Decided by Redis once it answered: OPEN's failure mode would have said the whole limit, 100.
    expect(answered.code).toBe("OK");
    expect(answered.limit_remaining).toBeLessThan(100);
    const error = (await envoy.shouldRateLimit(request("/open"), { deadlineMs: 2000 }).catch((e: unknown) => e)) as ServiceError;
    expect(error.code).toBe(status.UNAVAILABLE);
    expect(error.details).toContain("ECONNREFUSED");
    await expect(fetch(app.url)).rejects.toThrow();
  });
});
