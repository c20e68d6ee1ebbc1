/**
 * The checks' fast path answers exactly as Apollo would. Two servers run side
 * by side, alike in everything (the same rules with the same ids, counters in
 * memory on one pinned clock, the same keys) except that one has the fast path
 * and the other sends every request through Apollo Server. Each request goes
 * to both, in the same order, and the two answers must be the same bytes with
 * the same status and headers (content type, request id, length; all but
 * Date). A request the fast path declines (not a
 * check, invalid, refused variables, no or a bad token) is Apollo's on both
 * sides; the tests also count how many the fast path answered itself, so that
 * the comparison is not an empty one.
 */

import { createHash } from "node:crypto";
import fc from "fast-check";
import { print } from "graphql";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CheckFastPath } from "../../../src/api/fast-path/check-fast-path.js";
import type { Services } from "../../../src/api/context.js";
import { buildApiSchema } from "../../../src/api/schema.js";
import type { ApiKey, ApiKeyCredential, ApiKeyRepository, CounterCall, CounterStore, ShardedCounterStore } from "../../../src/domain/ports.js";
import type { Rule } from "../../../src/domain/rule.js";
import { ApiKeyService } from "../../../src/engine/access/api-key-service.js";
import { KnownApiKeys } from "../../../src/engine/access/known-api-keys.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import type { BanService } from "../../../src/engine/bans/ban-service.js";
import type { UsageService } from "../../../src/engine/usage/usage-service.js";
import { MutationLimiter } from "../../../src/engine/access/mutation-limiter.js";
import { OverLimitCache } from "../../../src/engine/decision/over-limit-cache.js";
import { ResilientCounterStore } from "../../../src/store/resilient-counter-store.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { RuleService } from "../../../src/engine/rules/rule-service.js";
import { startHttpServer, type RunningServer } from "../../../src/server/http-server.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { makeRule } from "../../support/domain-factory.js";
import {
  CheckBatchAndSingleDocument,
  CheckBatchVerdictsDocument,
  CheckLimitsBatchDocument,
  CheckLimitsDocument,
  CheckLimitsSourceDocument,
  CheckSingleThenBatchDocument,
  CheckTwoAliasedDocument,
} from "../../generated/graphql.js";
import { capturedLog } from "../../support/captured-log.js";
import { ManualClock } from "../../support/clock.js";
import { RecordingCounterStore } from "../../support/recording-counter-store.js";
import { InMemoryRuleRepository } from "../../support/in-memory-rule-repository.js";
import { listenToEvents } from "../../../src/event-listeners.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const ADMIN_TOKEN = "fast-path-admin-token-0123456789";
const CHECKER_SECRET = "fg_checker-of-acme";
const MAX_DEPTH = 6;
const MAX_FIELDS = 200;

const rules: Rule[] = [
  makeRule({ id: "acme-user", tenantId: "acme", name: "per user", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 3, window: 10 }),
  makeRule({ id: "acme-ip", tenantId: "acme", name: "per ip", scope: ["IP"], algorithm: "TOKEN_BUCKET", limit: 5, window: 1, windowUnit: "MINUTES", burst: 6 }),
  makeRule({ id: "acme-orders", tenantId: "acme", name: "orders", resource: "/api/orders", method: "POST", algorithm: "SLIDING_WINDOW_LOG", limit: 4, window: 30, priority: 2 }),
  makeRule({ id: "acme-throttle", tenantId: "acme", name: "throttle", scope: ["USER"], algorithm: "LEAKY_BUCKET", limit: 6, window: 20, action: "THROTTLE", burst: 3 }),
  makeRule({ id: "acme-shadow", tenantId: "acme", name: "shadow", scope: ["ENDPOINT"], algorithm: "SLIDING_WINDOW_COUNTER", limit: 2, window: 15, action: "LOG_ONLY" }),
  makeRule({ id: "acme-closed", tenantId: "acme", name: "closed when down", scope: ["USER"], limit: 100, window: 60, failureMode: "CLOSED" }),
  makeRule({ id: "acme-local", tenantId: "acme", name: "local when down", scope: ["IP"], limit: 4, window: 60, failureMode: "LOCAL" }),
  makeRule({ id: "acme-uploads", tenantId: "acme", name: "uploads in flight", resource: "/api/uploads", scope: ["USER"], algorithm: "CONCURRENCY", limit: 2, window: 30 }),
  makeRule({ id: "globex-all", tenantId: "globex", name: "everyone", limit: 2, window: 5 }),
  makeRule({ id: "boom-rule", tenantId: "boom", name: "explodes", limit: 2, window: 5 }),
  // Its delays (up to 40 days) do not fit a GraphQL Int: serialization errors.
  makeRule({ id: "slow-throttle", tenantId: "slow", name: "slow", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 1, window: 40, windowUnit: "DAYS", action: "THROTTLE" }),
];

/** API keys in a Map: the checker key of tenant acme. */
class FixedApiKeys implements ApiKeyRepository {
  private readonly checker: ApiKey = {
    id: "checker-acme",
    tenantId: "acme",
    role: "CHECKER",
    name: "checker",
    createdAt: new Date(0),
    revokedAt: null,
    createdBy: "bootstrap",
  };

  async findBySecretHash(secretHash: string): Promise<ApiKey | null> {
    return secretHash === createHash("sha256").update(CHECKER_SECRET).digest("hex") ? this.checker : null;
  }

  async credentials(): Promise<ApiKeyCredential[]> {
    return [];
  }

  async create(): Promise<ApiKey> {
    throw new Error("not in these tests");
  }

  async get(): Promise<ApiKey | null> {
    return null;
  }

  async list(): Promise<ApiKey[]> {
    return [];
  }

  async revoke(): Promise<ApiKey | null> {
    return null;
  }
}

/** Fails every call of tenant boom's rule with an error no one expects (an INTERNAL_SERVER_ERROR), and passes the others on. */
function explodingStore(inner: CounterStore): CounterStore {
  const boom = (calls: readonly CounterCall[]) => calls.some((call) => call.buckets.some((bucket) => bucket.ruleId === "boom-rule"));
  return new RecordingCounterStore(inner, (calls) => (boom(calls) ? new Error("the store's disk is on fire at /var/lib/store.db") : null));
}

/** A store that never answers, so that every rule decides by its failureMode (degraded). */
const UNREACHABLE: ShardedCounterStore = {
  description: "unreachable",
  decide: () => Promise.reject(new Error("connection refused")),
  decideEach: async (calls) => ({ results: calls.map(() => ({ error: new Error("connection refused") })), failedShards: new Set(["unreachable"]) }),
  shardOf: () => "unreachable",
  watchShards: () => () => undefined,
  reset: () => Promise.reject(new Error("connection refused")),
  releaseLease: () => Promise.reject(new Error("connection refused")),
  close: async () => undefined,
};

type Storage = "memory" | "unreachable";

interface Side {
  server: RunningServer;
  logs: Record<string, unknown>[];
}

async function startSide(storage: Storage, clock: ManualClock, fastPath: boolean): Promise<Side> {
  let leases = 0;
  const { logger, lines: logs } = capturedLog({ level: "info", base: null, timestamp: false });
  const events = new InProcessEventBus();
  const book = new RuleBook();
  book.load(rules);
  const memory = new MemoryCounterStore({ clock });
  const counters: CounterStore =
    storage === "memory"
      ? explodingStore(memory)
      : new ResilientCounterStore({
          primary: UNREACHABLE,
          local: memory,
          breakers: { failureThreshold: 2, openMs: 5_000 },
          instances: 2,
          timeoutMs: 1_000,
          clock,
        });
  const overLimit = new OverLimitCache(1_000);
  const keys = new FixedApiKeys();
  const services: Services = {
    rules: new RuleService(new InMemoryRuleRepository(), book, counters, events, clock),
    // Holders counted alike on both sides, so that the two hand out the same lease ids.
    limiter: new Limiter(book, counters, events, clock, { overLimit, leaseHolder: () => `00000000-0000-4000-8000-${String(leases++).padStart(12, "0")}` }),
    keys: new ApiKeyService(keys, {
      adminToken: ADMIN_TOKEN,
      clock,
      cacheMs: 60_000,
      events,
      known: new KnownApiKeys({ repository: keys, snapshot: null, reloadIntervalMs: 0, log: pino({ level: "silent" }) }),
    }),
    mutations: new MutationLimiter(counters, clock, 1_000),
    events,
    // Usage, health, access lists and bans are read by queries the fast path never serves, and these tests do not make.
    usage: {} as UsageService,
    accessLists: {} as Services["accessLists"],
    bans: {} as BanService,
    health: {} as Services["health"],
  };
  listenToEvents(events, { overLimit, keys: services.keys });
  const server = await startHttpServer(
    {
      schema: await buildApiSchema(events),
      services,
      logger,
      introspection: false,
      graphiql: false,
      maxBodyBytes: 1 << 20,
      maxQueryDepth: MAX_DEPTH,
      maxQueryFields: MAX_FIELDS,
      fastPathCacheSize: fastPath ? 100 : 0,
      fastPathCacheBytes: 64 << 20,
      maxSubscriptionsPerSocket: 10,
      maxSocketsPerKey: 10,
      apiKeyCacheMs: 60_000,
      shutdownTimeoutMs: 1_000,
      metrics: new Registry(),
      readiness: () => ({ ready: true }),
    },
    0,
    "127.0.0.1",
  );
  return { server, logs };
}

interface Exchange {
  headers?: Record<string, string>;
  /** A JSON body as it is sent (a string), or a value to send as JSON. */
  body: unknown;
  method?: "POST" | "GET";
  search?: string;
}

interface Answer {
  status: number;
  /** Every response header but Date (content-type, content-length, x-request-id, connection, keep-alive). */
  headers: Record<string, string>;
  body: string;
}

async function send(server: RunningServer, exchange: Exchange): Promise<Answer> {
  const method = exchange.method ?? "POST";
  const response = await fetch(server.url + (exchange.search ?? ""), {
    method,
    headers: { "content-type": "application/json", "x-request-id": "same-id-on-both-sides", ...exchange.headers },
    body: method === "GET" ? undefined : typeof exchange.body === "string" ? exchange.body : JSON.stringify(exchange.body),
  });
  return {
    status: response.status,
    headers: Object.fromEntries([...response.headers].filter(([name]) => name !== "date")),
    body: await response.text(),
  };
}

/** What the fast path itself answered since the last reset (undefined results: it declined, Apollo answered). */
const fastPathAnswer = vi.spyOn(CheckFastPath.prototype, "answer");
async function fastPathAnswers(): Promise<number> {
  const answers = await Promise.all(fastPathAnswer.mock.results.map((result) => result.value as Promise<unknown>));
  return answers.filter((answer) => answer !== null).length;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const ADMIN = bearer(ADMIN_TOKEN);
const CHECKER = bearer(CHECKER_SECRET);

describe.each<Storage>(["memory", "unreachable"])("the check fast path answers as Apollo does (counters %s)", (storage) => {
  const clock = new ManualClock();
  let fast: Side;
  let apollo: Side;

  beforeAll(async () => {
    fast = await startSide(storage, clock, true);
    apollo = await startSide(storage, clock, false);
  });

  afterAll(async () => {
    await fast?.server.close();
    await apollo?.server.close();
  });

  afterEach(() => {
    fastPathAnswer.mockClear();
  });

  /** Sends the exchange to both sides and requires the same answer; returns it. */
  async function same(exchange: Exchange): Promise<Answer> {
    const fromFast = await send(fast.server, exchange);
    const fromApollo = await send(apollo.server, exchange);
    expect(fromFast, JSON.stringify(exchange)).toEqual(fromApollo);
    return fromFast;
  }

  const documented = [
    CheckLimitsDocument,
    CheckLimitsBatchDocument,
    CheckTwoAliasedDocument,
    CheckBatchAndSingleDocument,
    CheckLimitsSourceDocument,
    CheckBatchVerdictsDocument,
    CheckSingleThenBatchDocument,
  ].map((document) => print(document));

  it("answers the test operations (every field of LimitDecision and RuleResult, batches, aliases, fragments) itself, identically, allowed and then denied", async () => {
    const request = { tenantId: "acme", userId: "doc-user", ip: "10.0.0.9", resource: "/api/orders", method: "POST" };
    const variables = { request, requests: [request, { ...request, userId: "doc-user-2" }], first: request, second: request, single: request };
    const answers: Answer[] = [];
    for (let round = 0; round < 3; round++) {
      for (const query of documented) {
        answers.push(await same({ headers: ADMIN, body: { query, variables } }));
        clock.advance(250);
      }
    }
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    expect(answers.map((answer) => answer.body).join()).toContain('"allowed":false');
    expect(await fastPathAnswers()).toBe(answers.length);
  });

  it("answers a lease (CONCURRENCY) itself, identically: the lease while a slot is free, null once the rule refuses", async () => {
    const query = "query Upload($request: CheckLimitsInput!) { checkLimits(request: $request) { allowed lease { id expiresAt } l: lease { expiresAt } remaining } }";
    const request = { tenantId: "acme", userId: `uploader-${storage}`, resource: "/api/uploads" };
    const bodies: string[] = [];
    for (let round = 0; round < 3; round++) bodies.push((await same({ headers: ADMIN, body: { query, variables: { request } } })).body);
    if (storage === "memory") {
      expect(bodies[0]).toMatch(/"lease":\{"id":"[A-Za-z0-9_-]+","expiresAt":"[^"]+"\}/);
      expect(bodies[2]).toContain('"lease":null');
    } else {
      // acme-closed (CLOSED) refuses every check of a user while the store is down: no lease.
      expect(bodies.every((body) => body.includes('"lease":null'))).toBe(true);
    }
    expect(await fastPathAnswers()).toBe(3);
  });

  it("answers alike for every way a request can be unwelcome, leaving to Apollo what it must", async () => {
    const check = "query Check($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed remaining } }";
    const variables = { r: { tenantId: "acme", userId: "u-unwelcome" } };
    const unwelcome: Exchange[] = [
      { body: { query: check, variables } },
      { headers: bearer("fg_not-a-key"), body: { query: check, variables } },
      { headers: { authorization: "Basic abc" }, body: { query: check, variables } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: "globex" } } } },
      { headers: CHECKER, body: { query: '{ a: checkLimits(request: {tenantId: "acme"}) { allowed } b: checkLimits(request: {tenantId: "globex"}) { allowed } }' } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: 42 } } } },
      { headers: CHECKER, body: { query: check, variables: {} } },
      { headers: CHECKER, body: { query: check } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: "acme", cost: 1.5 } } } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: "acme", colour: "red" } } } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: "acme", cost: 0 } } } },
      { headers: CHECKER, body: { query: check, variables: { r: { tenantId: "" } } } },
      { headers: CHECKER, body: { query: "{ checkLimits(request: {tenantId: \"acme\"}) { allowed noSuchField } }" } },
      { headers: CHECKER, body: { query: "{ checkLimits(request: {tenantId: \"acme\"}) { allowed " } },
      { headers: CHECKER, body: { query: "{ checkLimits(request: {tenantId: \"acme\"}) { results { rule { id } } } }" } },
      { headers: CHECKER, body: { query: `{ checkLimits(request: {tenantId: "acme"}) { ${Array.from({ length: MAX_FIELDS }, (_, i) => `f${i}: allowed`).join(" ")} } }` } },
      { headers: CHECKER, body: { query: check, variables, operationName: "Other" } },
      {
        headers: CHECKER,
        body: {
          query: "query Twice($rs: [CheckLimitsInput!]!) { a: checkLimitsBatch(requests: $rs) { allowed } b: checkLimitsBatch(requests: $rs) { allowed } }",
          variables: { rs: Array.from({ length: 501 }, () => ({ tenantId: "acme", userId: "u-unwelcome" })) },
        },
      },
      { headers: CHECKER, body: { query: `{ ${Array.from({ length: 1001 }, (_, i) => `c${i}: checkLimits(request: {tenantId: "acme"}) { allowed }`).join(" ")} }` } },
      { headers: CHECKER, body: { query: `${check} query Two { checkLimits(request: {tenantId: "acme"}) { allowed } }`, variables } },
      { headers: CHECKER, body: { query: `${check} query Two { checkLimits(request: {tenantId: "acme"}) { allowed } }`, variables, operationName: "Check" } },
      { headers: CHECKER, body: { query: check, variables: "{}" } },
      { headers: CHECKER, body: { query: check, variables, operationName: 7 } },
      { headers: CHECKER, body: { query: check, variables, extensions: { persistedQuery: { version: 1, sha256Hash: "0".repeat(64) } } } },
      { headers: CHECKER, body: { query: "{ checkLimits(request: {tenantId: \"acme\"}) @include(if: true) { allowed } }" } },
      { headers: CHECKER, body: { query: "mutation { resetLimit(ruleId: \"acme-user\", key: \"user:u1\") }" } },
      { headers: ADMIN, body: { query: "{ checkLimits(request: {tenantId: \"boom\"}) { allowed } }" } },
      { headers: ADMIN, body: { query: "{ __typename checkLimits(request: {tenantId: \"acme\"}) { allowed } }" } },
      { headers: ADMIN, body: { query: "{ __schema { queryType { name } } }" } },
      { headers: { ...ADMIN, accept: "application/graphql-response+json" }, body: { query: check, variables } },
      { headers: { ...ADMIN, accept: "text/html" }, body: { query: check, variables } },
      { headers: { ...ADMIN, accept: "*/*" }, body: { query: check, variables } },
      { headers: { ...ADMIN, accept: "application/json" }, body: { query: check, variables } },
      { headers: { ...ADMIN, "content-type": "application/json; charset=utf-8" }, body: { query: check, variables } },
      { headers: { ...ADMIN, "content-type": "text/plain" }, body: { query: check, variables } },
      { headers: ADMIN, body: "[1, 2]" },
      { headers: ADMIN, body: "{}" },
      { headers: ADMIN, body: { query: check, variables: [] } },
      { headers: ADMIN, method: "GET", search: `?query=${encodeURIComponent(check)}&variables=${encodeURIComponent(JSON.stringify(variables))}`, body: undefined },
    ];
    const codes = new Set<string>();
    for (const exchange of unwelcome) {
      const answer = await same(exchange);
      for (const error of (JSON.parse(answer.body) as { errors?: { extensions?: { code?: string } }[] }).errors ?? []) codes.add(error.extensions?.code ?? "");
    }
    const expected = ["BAD_REQUEST", "BAD_USER_INPUT", "FORBIDDEN", "GRAPHQL_PARSE_FAILED", "GRAPHQL_VALIDATION_FAILED", "NOT_FOUND", "OPERATION_RESOLUTION_FAILURE", "UNAUTHENTICATED"];
    // Tenant boom's store failure; with the store unreachable it is a degraded decision instead.
    if (storage === "memory") expected.push("INTERNAL_SERVER_ERROR");
    expect([...codes].sort()).toEqual(expected.sort());
    // FORBIDDEN twice, BAD_USER_INPUT from the domain twice, tenant boom, the operation picked by name, and three accepted media types.
    expect(await fastPathAnswers()).toBe(10);
  });

  it("counts the checks of a field whose sibling's input is refused as Apollo does, whichever comes first", async () => {
    const user = `u-sibling-${storage}`;
    const good = { tenantId: "acme", userId: user, ip: "10.0.0.3", resource: "/api/orders" };
    const bad = { tenantId: "" };
    const batches = "query Two($x: [CheckLimitsInput!]!, $y: [CheckLimitsInput!]!) { x: checkLimitsBatch(requests: $x) { allowed } y: checkLimitsBatch(requests: $y) { allowed } }";
    const singles = "query Two($x: CheckLimitsInput!, $y: CheckLimitsInput!) { x: checkLimits(request: $x) { allowed } y: checkLimits(request: $y) { allowed } }";
    const read = { query: "query Read($r: CheckLimitsInput!) { checkLimits(request: $r) { remaining results { key remaining } } }", variables: { r: { ...good, dryRun: true } } };
    for (const [query, x, y] of [
      [batches, [bad], [good]],
      [batches, [good], [bad]],
      [singles, bad, good],
      [singles, good, bad],
    ] as const) {
      expect((await same({ headers: ADMIN, body: { query, variables: { x, y } } })).body).toContain("BAD_USER_INPUT");
      await same({ headers: ADMIN, body: read });
    }
    // An argument graphql itself refuses as the field runs: a nullable variable with a default, sent as null.
    const sibling = `s: checkLimits(request: {tenantId: "acme", userId: "${user}", ip: "10.0.0.3", resource: "/api/orders"}) { allowed }`;
    const refused = "n: checkLimits(request: $r) { allowed }";
    for (const fields of [`${refused} ${sibling}`, `${sibling} ${refused}`]) {
      const query = `query Q($r: CheckLimitsInput = {tenantId: "acme", userId: "defaulted"}) { ${fields} }`;
      expect((await same({ headers: ADMIN, body: { query, variables: { r: null } } })).body).toContain("BAD_USER_INPUT");
      await same({ headers: ADMIN, body: read });
    }
  });

  it("logs an unexpected error with the request id, the same on both sides", async () => {
    const before = { fast: fast.logs.length, apollo: apollo.logs.length };
    await same({ headers: ADMIN, body: { query: '{ checkLimits(request: {tenantId: "boom", userId: "x"}) { allowed } }' } });
    const logged = (side: Side, from: number) => side.logs.slice(from).map((line) => [line.msg, line.requestId, (line.err as { message?: string } | undefined)?.message]);
    expect(logged(fast, before.fast)).toEqual(logged(apollo, before.apollo));
    if (storage === "memory") {
      expect(logged(fast, before.fast)).toEqual([["unexpected error", "same-id-on-both-sides", "the store's disk is on fire at /var/lib/store.db"]]);
    }
  });

  it("answers any sequence of generated checks alike (property)", { timeout: 120_000 + RUNS * 500 }, async () => {
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(exchangeArbitrary, { minLength: 1, maxLength: 6 }), async (exchanges) => {
        for (const { advanceMs, exchange } of exchanges) {
          clock.advance(advanceMs);
          await same(exchange);
          sent++;
        }
      }),
      { numRuns: RUNS },
    );
    const answered = await fastPathAnswers();
    console.log(`check fast path (${storage}): ${answered} of ${sent} generated requests answered by the fast path, the rest by Apollo on both sides`);
    expect(answered).toBeGreaterThan(sent / 4);
  });
});

// ---- generated requests ----------------------------------------------------

const DECISION_FIELDS = ["allowed", "degraded", "decidedAt", "source", "action", "limit", "remaining", "resetAt", "retryAfter", "delayMs", "nearLimit", "__typename"];
const RULE_FIELDS = ["id", "tenantId", "name", "scope", "resource", "method", "algorithm", "limit", "window", "windowUnit", "windowSeconds", "burst", "action", "failureMode", "priority", "enabled", "version", "createdAt", "updatedAt"];
const RESULT_FIELDS = ["key", "allowed", "limit", "remaining", "resetAt", "retryAfter", "delayMs", "consulted", "nearLimit"];

const fieldList = (fields: string[]) => fc.subarray(fields, { minLength: 1 }).map((picked) => picked.join(" "));
/** True once in `n` times. */
const rarely = (n: number) => fc.integer({ min: 1, max: n }).map((drawn) => drawn === 1);

interface Selection {
  /** What goes between the braces of the root field. */
  selection: string;
  /** A named fragment it spreads, or "". */
  fragment: string;
}

/** A selection of LimitDecision (its fragment, if any, named `name`): any of its fields, the rule's, every result's and the headers, some behind fragments, sometimes a field that does not exist. */
const selectionArbitrary = (name: string): fc.Arbitrary<Selection> => fc
  .record({
    scalars: fc.subarray(DECISION_FIELDS),
    aliased: fc.boolean(),
    rule: fc.option(fieldList(RULE_FIELDS), { nil: undefined }),
    results: fc.option(fc.record({ fields: fieldList(RESULT_FIELDS), rule: fc.option(fieldList(RULE_FIELDS), { nil: undefined }) }), { nil: undefined }),
    headers: fc.option(fieldList(["name", "value"]), { nil: undefined }),
    inline: fc.boolean(),
    named: fc.boolean(),
    unknown: rarely(10),
  })
  .map(({ scalars, aliased, rule, results, headers, inline, named, unknown }) => {
    const parts = scalars.map((field, i) => (aliased && i % 2 === 0 ? `a${i}: ${field}` : field));
    if (rule) parts.push(`rule { ${rule} }`);
    if (results) parts.push(`results { ${results.fields}${results.rule ? ` rule { ${results.rule} }` : ""} }`);
    if (headers) parts.push(`headers { ${headers} }`);
    if (unknown) parts.push("noSuchField");
    if (parts.length === 0) parts.push("allowed");
    const [first, ...rest] = parts;
    const inner = inline ? `${first} ... on LimitDecision { ${rest.join(" ")} }` : parts.join(" ");
    return named ? { selection: `...${name}`, fragment: `fragment ${name} on LimitDecision { ${inner} }` } : { selection: inner, fragment: "" };
  });

/** A field of the wrong GraphQL type, or one the input type does not have. */
const MISTYPED: Record<string, unknown>[] = [{ tenantId: 5 }, { cost: 1.5 }, { cost: "2" }, { cost: 2 ** 31 }, { dryRun: "yes" }, { ignorePathCase: 1 }, { userId: ["u1"] }, { colour: "red" }];

/** A check's input, mostly valid, sometimes refused by the domain (BAD_USER_INPUT), the caller's rights (FORBIDDEN) or GraphQL's types. */
const checkInputArbitrary = fc
  .record(
    {
      tenantId: fc.constantFrom<unknown>("acme", "acme", "acme", "globex", "boom", "slow", "", "*"),
      userId: fc.constantFrom<unknown>("u1", "u2", "u3", null, ""),
      ip: fc.constantFrom<unknown>("10.0.0.1", "10.0.0.2", "::ffff:10.0.0.1", "not-an-ip", null),
      resource: fc.constantFrom<unknown>("/api/orders", "/api/orders?page=2", "/API/Orders", "/other", null),
      method: fc.constantFrom<unknown>("POST", "GET", "post", "BREW", null),
      cost: fc.constantFrom<unknown>(1, 1, 2, 5, 0, 1_000_001, null),
      dryRun: fc.constantFrom<unknown>(true, false, false, null),
      ignorePathCase: fc.constantFrom<unknown>(true, false, null),
    },
    { requiredKeys: [] },
  )
  .chain((input) => fc.tuple(fc.constant(input), rarely(12), rarely(25), fc.constantFrom(...MISTYPED)))
  .map(([input, withoutTenant, mistype, mistyped]) => ({ ...(withoutTenant ? {} : { tenantId: "acme" }), ...input, ...(mistype ? mistyped : {}) }));

/** A GraphQL literal for a JSON value (input objects and lists as GraphQL writes them). */
function literal(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(literal).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .map(([key, v]) => `${key}: ${literal(v)}`)
      .join(", ")}}`;
  }
  return JSON.stringify(value);
}

interface RootField {
  batch: boolean;
  inputs: Record<string, unknown>[];
  /** Passed as a variable (else written into the document). */
  variable: boolean;
  /** Declared but not sent. */
  missing: boolean;
  selection: Selection;
}

const rootFieldArbitrary = (i: number): fc.Arbitrary<RootField> =>
  fc.record({
    batch: fc.boolean(),
    inputs: fc.array(checkInputArbitrary, { minLength: 0, maxLength: 3 }),
    variable: fc.boolean(),
    missing: rarely(10),
    selection: selectionArbitrary(`Picked${i}`),
  });

const exchangeArbitrary = fc
  .record({
    fields: fc.integer({ min: 1, max: 3 }).chain((count) => fc.tuple(...Array.from({ length: count }, (_, i) => rootFieldArbitrary(i)))),
    token: fc.constantFrom<Record<string, string>>(ADMIN, ADMIN, ADMIN, CHECKER, CHECKER, {}, bearer("fg_wrong")),
    named: fc.boolean(),
    advanceMs: fc.integer({ min: 0, max: 20_000 }),
  })
  .map(({ fields, token, named, advanceMs }) => {
    const declarations: string[] = [];
    const variables: Record<string, unknown> = {};
    const fragments: string[] = [];
    const roots = fields.map((field, i) => {
      const value = field.batch ? field.inputs : (field.inputs[0] ?? { tenantId: "acme" });
      let argument = literal(value);
      if (field.variable) {
        declarations.push(`$v${i}: ${field.batch ? "[CheckLimitsInput!]!" : "CheckLimitsInput!"}`);
        if (!field.missing) variables[`v${i}`] = value;
        argument = `$v${i}`;
      }
      if (field.selection.fragment) fragments.push(field.selection.fragment);
      const name = field.batch ? "checkLimitsBatch" : "checkLimits";
      return `c${i}: ${name}(${field.batch ? "requests" : "request"}: ${argument}) { ${field.selection.selection} }`;
    });
    const head = named || declarations.length > 0 ? `query${named ? " Generated" : ""}${declarations.length > 0 ? `(${declarations.join(", ")})` : ""}` : "";
    const query = [`${head} { ${roots.join(" ")} }`, ...fragments].join("\n");
    return { advanceMs, exchange: { headers: token, body: { query, variables, ...(named ? { operationName: "Generated" } : {}) } } };
  });
