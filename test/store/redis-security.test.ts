/**
 * Redis with passwords, ACL users and TLS, on real servers of this suite's
 * own: one Redis (requirepass, an ACL user; TLS with a private CA and client
 * certificates), a Redis Cluster with a password (and one over TLS), and a
 * Sentinel group with passwords. Right
 * settings: the service starts and its checks are decided by Redis. Wrong
 * ones: the start stops with a message naming the settings to look at,
 * rather than serving on failure modes forever.
 */

import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp } from "../../src/app.js";
import { loadSettings, SettingsError } from "../../src/config/settings.js";
import { CheckLimitsDocument, CreateRuleDocument } from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { makeCertificates, type Certificates } from "../support/certificates.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { connectAtStart, createRedisClient } from "../../src/store/redis/client.js";
import { startRedisCluster, startRedisSentinel, type LocalRedisCluster, type LocalRedisSentinel } from "../harness/local-redis.js";
import { startOwnRedis, type OwnRedis } from "../harness/redis-server.js";
import { redisBinariesAvailable } from "../support/services.js";

const PREFIX = "fgsec:";
const PASSWORD = "node-password-0123";

/** Starts the service on this Redis, checks once through it, and says whether Redis decided; stops it again. */
async function checkThrough(env: Record<string, string>): Promise<{ degraded: boolean }> {
  const adminToken = testAdminToken();
  const app = await startApp(loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ADMIN_TOKEN: adminToken, REDIS_KEY_PREFIX: PREFIX, REDIS_TIMEOUT_MS: "2000", ...env }), {
    logger: pino({ level: "silent" }),
  });
  try {
    const client = new GraphQLClient(app.url, adminToken);
    await client.data(CreateRuleDocument, { input: { tenantId: "secure", name: "per-user", scope: ["USER"], limit: 5, window: 60, failureMode: "CLOSED" } });
    const { checkLimits } = await client.data(CheckLimitsDocument, { request: { tenantId: "secure", userId: "u1" } });
    return { degraded: checkLimits.degraded };
  } finally {
    await app.close();
  }
}

/** The message the service stops its start with, on these settings. */
async function startRefused(env: Record<string, string>): Promise<string> {
  const error = await checkThrough(env).then(
    () => null,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(SettingsError);
  return (error as Error).message;
}

/** What connecting the counters' client at start finds wrong with these settings (what startApp stops with), without starting the rest. */
async function refusal(env: Record<string, string>): Promise<string | null> {
  const settings = loadSettings(env);
  const client = createRedisClient(settings.redis!, 2000, settings.redisSecurity);
  client.on("error", () => undefined);
  const connection = await connectAtStart(client);
  client.disconnect();
  return "misconfigured" in connection ? connection.misconfigured : null;
}

/** Starting a whole service (an in-memory PGlite first) takes seconds on a loaded machine. */
const STARTS = { timeout: 90_000 };

describe.runIf(await redisBinariesAvailable())("Redis security", () => {
  let certificates: Certificates;
  beforeAll(() => {
    certificates = makeCertificates();
  });
  afterAll(() => certificates?.remove());
  describe("one Redis with a password and ACL users", () => {
    let redis: OwnRedis;
    let admin: Redis;

    beforeAll(async () => {
      redis = await startOwnRedis({
        args: [
          "--requirepass", PASSWORD,
          // What a Floodgate instance needs (docs/operations.md, "Connecting securely"): its own keys and channels, data commands, scripts, pub/sub, and what ioredis sends on connecting.
          ...["--user", "floodgate", "on", ">acl-password-0123", `~${PREFIX}*`, `&${PREFIX}*`, "-@all", "+@read", "+@write", "+@scripting", "+@pubsub", "+@connection", "+info", "+time"],
        ],
      });
      admin = new Redis(redis.url, { password: PASSWORD });
    });
    afterAll(async () => {
      admin?.disconnect();
      await redis?.stop();
    });

    it("starts with the password in REDIS_URL, and Redis decides", STARTS, async () => {
      expect(await checkThrough({ REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redis.port}` })).toEqual({ degraded: false });
      expect(await admin.keys(`${PREFIX}*`)).not.toEqual([]);
    });

    it("starts as an ACL user given by REDIS_USERNAME and REDIS_PASSWORD, whose rights cover everything the service does", STARTS, async () => {
      await admin.call("ACL", "LOG", "RESET");
      expect(await checkThrough({ REDIS_URL: redis.url, REDIS_USERNAME: "floodgate", REDIS_PASSWORD: "acl-password-0123" })).toEqual({ degraded: false });
      expect(await admin.call("ACL", "LOG")).toEqual([]);
    });

    it("refuses to start with a wrong password, naming the settings", STARTS, async () => {
      expect(await startRefused({ REDIS_URL: `redis://:wrong-password@127.0.0.1:${redis.port}` })).toBe(
        "Redis refused the credentials (WRONGPASS invalid username-password pair or user is disabled.): check REDIS_USERNAME and REDIS_PASSWORD (or the user and password in REDIS_URL)",
      );
    });

    it("finds no password, or a wrong ACL user's password, as wrong as a wrong password", async () => {
      expect(await refusal({ REDIS_URL: redis.url })).toBe(
        "Redis refused the credentials (NOAUTH Authentication required.): check REDIS_USERNAME and REDIS_PASSWORD (or the user and password in REDIS_URL)",
      );
      expect(await refusal({ REDIS_URL: redis.url, REDIS_USERNAME: "floodgate", REDIS_PASSWORD: "wrong-password" })).toMatch(/^Redis refused the credentials \(WRONGPASS /);
      expect(await refusal({ REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:${redis.port}` })).toBeNull();
    });
  });

  describe("one Redis over TLS that wants client certificates", () => {
    let redis: OwnRedis;

    beforeAll(async () => {
      redis = await startOwnRedis({
        tls: { cert: certificates.serverCert, key: certificates.serverKey, ca: certificates.ca, authClients: true },
        args: ["--requirepass", PASSWORD],
      });
    });
    afterAll(() => redis?.stop());

    const tls = () => ({
      REDIS_URL: `rediss://:${PASSWORD}@127.0.0.1:${redis.port}`,
      REDIS_TLS_CA_FILE: certificates.ca,
      REDIS_TLS_CERT_FILE: certificates.clientCert,
      REDIS_TLS_KEY_FILE: certificates.clientKey,
    });

    it("starts with rediss://, the CA and a client certificate, and Redis decides", STARTS, async () => {
      expect(await checkThrough(tls())).toEqual({ degraded: false });
    });

    it("refuses to start when the server's certificate does not verify, naming the TLS settings", STARTS, async () => {
      const { REDIS_TLS_CA_FILE: _ca, ...withoutCa } = tls();
      expect(await startRefused(withoutCa)).toMatch(
        /^TLS with Redis failed \(SELF_SIGNED_CERT_IN_CHAIN: .*\): check rediss:\/\/ or REDIS_TLS, REDIS_TLS_CA_FILE, REDIS_TLS_SERVERNAME, REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE$/,
      );
    });

    it("finds another CA's certificate, or one without REDIS_TLS_SERVERNAME's name, as wrong", async () => {
      expect(await refusal({ ...tls(), REDIS_TLS_CA_FILE: certificates.otherCa })).toMatch(/^TLS with Redis failed \(SELF_SIGNED_CERT_IN_CHAIN: /);
      expect(await refusal({ ...tls(), REDIS_TLS_SERVERNAME: "redis.elsewhere.example" })).toMatch(/^TLS with Redis failed \(ERR_TLS_CERT_ALTNAME_INVALID: /);
      expect(await refusal({ ...tls(), REDIS_TLS_SERVERNAME: "localhost" })).toBeNull();
    });

  });

  describe("a Redis Cluster with requirepass and masterauth", () => {
    let cluster: LocalRedisCluster;
    const nodes = () => cluster.nodes.map((n) => `${n.host}:${n.port}`).join(",");

    beforeAll(async () => {
      cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 0, password: PASSWORD });
    });
    afterAll(() => cluster?.stop());

    it("starts with REDIS_PASSWORD, and Redis decides", STARTS, async () => {
      expect(await checkThrough({ REDIS_CLUSTER_NODES: nodes(), REDIS_PASSWORD: PASSWORD })).toEqual({ degraded: false });
    });

    it("refuses to start with a wrong password", STARTS, async () => {
      expect(await startRefused({ REDIS_CLUSTER_NODES: nodes(), REDIS_PASSWORD: "wrong-password" })).toMatch(/^Redis refused the credentials \(WRONGPASS .*\): check REDIS_USERNAME and REDIS_PASSWORD/);
    });

    it("finds no password as wrong", async () => {
      expect(await refusal({ REDIS_CLUSTER_NODES: nodes() })).toMatch(/^Redis refused the credentials \(NOAUTH /);
    });
  });

  describe("a Redis Cluster over TLS, between its nodes too, with a password", () => {
    let cluster: LocalRedisCluster;

    beforeAll(async () => {
      cluster = await startRedisCluster({
        masters: 3,
        replicasPerMaster: 0,
        password: PASSWORD,
        tls: { cert: certificates.serverCert, key: certificates.serverKey, ca: certificates.ca },
      });
    });
    afterAll(() => cluster?.stop());

    it("starts with REDIS_TLS, the CA and the password, and Redis decides on the nodes it learns of", STARTS, async () => {
      const nodes = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(",");
      expect(await checkThrough({ REDIS_CLUSTER_NODES: nodes, REDIS_PASSWORD: PASSWORD, REDIS_TLS: "1", REDIS_TLS_CA_FILE: certificates.ca })).toEqual({ degraded: false });
    });
  });

  describe("a Sentinel group whose nodes and sentinel have passwords", () => {
    let group: LocalRedisSentinel;
    const env = (nodePassword: string, sentinelPassword: string) => ({
      REDIS_SENTINELS: group.sentinels.map((s) => `${s.host}:${s.port}`).join(","),
      REDIS_SENTINEL_MASTER: group.masterName,
      REDIS_PASSWORD: nodePassword,
      REDIS_SENTINEL_PASSWORD: sentinelPassword,
    });

    beforeAll(async () => {
      group = await startRedisSentinel({ password: PASSWORD, sentinelPassword: "sentinel-password-0123" });
    });
    afterAll(() => group?.stop());

    it("starts with both passwords, and Redis decides", STARTS, async () => {
      expect(await checkThrough(env(PASSWORD, "sentinel-password-0123"))).toEqual({ degraded: false });
    });

    it("refuses to start with a wrong sentinel password, naming the sentinel settings", STARTS, async () => {
      expect(await startRefused(env(PASSWORD, "wrong-password"))).toMatch(/^Redis refused the credentials \(WRONGPASS .*\): check REDIS_SENTINEL_USERNAME and REDIS_SENTINEL_PASSWORD$/);
    });

    it("finds a wrong node password as wrong, naming the node settings", async () => {
      expect(await refusal(env("wrong-password", "sentinel-password-0123"))).toMatch(/^Redis refused the credentials \(WRONGPASS .*\): check REDIS_USERNAME and REDIS_PASSWORD/);
    });
  });
});
