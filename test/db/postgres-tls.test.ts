/**
 * DATABASE_URL's TLS parameters reach both ways the service talks to
 * Postgres (Prisma's pg adapter for rules and keys, the pg client that runs
 * the migrations), against a Postgres of this suite's own that accepts TLS
 * connections only, with a certificate from a private CA.
 */

import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { CreateRuleDocument, ListRulesDocument } from "../generated/graphql.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { makeCertificates, type Certificates } from "../support/certificates.js";
import { GraphQLClient } from "../harness/graphql-client.js";
import { startTlsPostgres, tlsPostgresAvailable, type TlsPostgres } from "../support/tls-postgres.js";

/** Starting a service and a private Postgres takes seconds on a loaded machine. */
const SLOW = { timeout: 90_000 };

describe.runIf(tlsPostgresAvailable())("Postgres over TLS", () => {
  let certificates: Certificates;
  let postgres: TlsPostgres;
  const url = (query: string) => `postgresql://postgres@127.0.0.1:${postgres.port}/postgres${query}`;

  beforeAll(async () => {
    certificates = makeCertificates();
    postgres = await startTlsPostgres({ cert: certificates.serverCert, key: certificates.serverKey });
  }, 90_000);
  afterAll(async () => {
    await postgres?.stop();
    certificates?.remove();
  });

  /** Starts the service on DATABASE_URL, creates a rule and lists it back; the error if it cannot. */
  async function useRules(databaseUrl: string): Promise<{ names: string[] } | { error: Error }> {
    const adminToken = testAdminToken();
    let app;
    try {
      app = await startApp(loadSettings({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ADMIN_TOKEN: adminToken, DATABASE_URL: databaseUrl }), {
        logger: pino({ level: "silent" }),
      });
    } catch (error) {
      return { error: error as Error };
    }
    try {
      const client = new GraphQLClient(app.url, adminToken);
      await client.data(CreateRuleDocument, { input: { tenantId: "tls", name: `rule-${Math.random().toString(36).slice(2)}`, limit: 5, window: 60 } });
      return { names: (await client.data(ListRulesDocument, { tenantId: "tls" })).rules.map((r) => r.name) };
    } finally {
      await app.close();
    }
  }

  it("works with sslmode=verify-full and the CA in sslrootcert: migrations, writes and reads", SLOW, async () => {
    const result = await useRules(url(`?sslmode=verify-full&sslrootcert=${certificates.ca}`));
    expect(result).toEqual({ names: [expect.stringMatching(/^rule-/)] });
  });

  it("is refused without TLS: the server takes TLS connections only", SLOW, async () => {
    const result = await useRules(url(""));
    expect("error" in result && result.error.message + String((result.error.cause as Error | undefined)?.message)).toMatch(/no encryption/);
  });

  it("verifies the certificate for sslmode=require as for verify-full (node-postgres), unless uselibpqcompat=true asks for libpq's meaning", SLOW, async () => {
    const verified = await useRules(url("?sslmode=require"));
    expect("error" in verified && verified.error.message).toMatch(/unable to verify the first certificate/);
    expect(await useRules(url(`?sslmode=verify-full&sslrootcert=${certificates.otherCa}`))).toEqual({ error: expect.any(Error) });
    expect(await useRules(url("?uselibpqcompat=true&sslmode=require"))).toEqual({ names: expect.any(Array) });
  });
});
