/**
 * checkLimitsBatch and several checks in one operation: over HTTP for what the
 * caller sees, and in-process (schema executed directly, around a counter store
 * that records its calls) for the one-round-trip promise.
 */

import { execute, parse, type ExecutionResult, type GraphQLFormattedError, type GraphQLSchema } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createContext, type Services } from "../../src/api/context.js";
import { buildApiSchema } from "../../src/api/schema.js";
import { ValidationError } from "../../src/domain/errors.js";
import { systemClock } from "../../src/domain/ports.js";
import { parseCheckRequest } from "../../src/domain/request.js";
import { BOOTSTRAP, type ApiKeyService } from "../../src/engine/access/api-key-service.js";
import { Limiter } from "../../src/engine/decision/limiter.js";
import type { BanService } from "../../src/engine/bans/ban-service.js";
import type { UsageService } from "../../src/engine/usage/usage-service.js";
import type { MutationLimiter } from "../../src/engine/access/mutation-limiter.js";
import { RuleBook } from "../../src/engine/decision/rule-book.js";
import { RuleService } from "../../src/engine/rules/rule-service.js";
import type { RuleSync } from "../../src/engine/rules/rule-sync.js";
import { InProcessEventBus } from "../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import {
  CheckBatchAndSingleDocument,
  CheckLimitsBatchDocument,
  CheckTwoAliasedDocument,
  CreateRuleDocument,
  type CheckBatchAndSingleQuery,
  type CheckLimitsBatchQuery,
  type CheckLimitsInput,
  type CheckTwoAliasedQuery,
  type CreateRuleMutation,
} from "../generated/graphql.js";
import { InMemoryRuleRepository } from "../support/in-memory-rule-repository.js";
import { CountingCounterStore } from "../support/ports.js";
import { inProcessRuleSync } from "../support/rule-sync.js";
import { check, createRule, describeOnEachStorage, expectBadUserInput, expectNoStackTrace, newTenant } from "../support/api.js";

await describeOnEachStorage("checkLimitsBatch over HTTP", (suite) => {
  async function perUserRule(tenantId: string, limit: number) {
    return createRule(suite.client, { tenantId, name: "per-user", scope: ["USER"], limit, window: 1, windowUnit: "MINUTES" });
  }

  it("applies the checks of a batch in order: limit 2, three checks of one user -> allowed, allowed, denied", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 2);
    const request = { tenantId, userId: "u1" };
    const { checkLimitsBatch } = await suite.client.data(CheckLimitsBatchDocument, { requests: [request, request, request] });
    expect(checkLimitsBatch.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(checkLimitsBatch.map((d) => d.remaining)).toEqual([1, 0, 0]);
  });

  it("returns one decision per request, in the order of the requests", async () => {
    const limited = newTenant();
    const rule = await perUserRule(limited, 5);
    const requests: CheckLimitsInput[] = [
      { tenantId: limited, userId: "u1" },
      { tenantId: newTenant(), userId: "u1" },
      { tenantId: limited, userId: "u2" },
      { tenantId: limited, userId: "u1" },
    ];
    const { checkLimitsBatch } = await suite.client.data(CheckLimitsBatchDocument, { requests });
    expect(checkLimitsBatch).toHaveLength(4);
    expect(checkLimitsBatch.map((d) => d.rule?.id ?? null)).toEqual([rule.id, null, rule.id, rule.id]);
    expect(checkLimitsBatch.map((d) => d.results[0]?.key ?? null)).toEqual(["user:u1", null, "user:u2", "user:u1"]);
    expect(checkLimitsBatch.map((d) => d.remaining)).toEqual([4, null, 4, 3]);
  });

  it("returns an empty list for an empty batch", async () => {
    expect((await suite.client.data(CheckLimitsBatchDocument, { requests: [] })).checkLimitsBatch).toEqual([]);
  });

  it("fails a batch holding one invalid request with BAD_USER_INPUT naming requests[1].cost", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 5);
    const valid = { tenantId, userId: "u1" };
    const response = await suite.client.request(CheckLimitsBatchDocument, { requests: [valid, { ...valid, cost: 0 }, valid] });
    expect(response.data).toBeNull();
    expectBadUserInput(response.errors, "requests[1].cost");
    expectNoStackTrace(response);
  });

  it("consumes nothing for the valid requests of a batch that fails validation", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 5);
    const valid = { tenantId, userId: "u1" };
    await suite.client.request(CheckLimitsBatchDocument, { requests: [valid, valid, { ...valid, ip: "not-an-ip" }] });
    expect((await check(suite.client, valid)).remaining).toBe(4);
  });

  it("names the invalid field of the failing request, e.g. requests[2].ip", async () => {
    const valid = { tenantId: newTenant(), userId: "u1" };
    const response = await suite.client.request(CheckLimitsBatchDocument, { requests: [valid, valid, { ...valid, ip: "not-an-ip" }] });
    expectBadUserInput(response.errors, "requests[2].ip");
  });

  it("refuses more than 1000 requests with BAD_USER_INPUT naming requests, and consumes nothing", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 5);
    const request = { tenantId, userId: "u1" };
    const response = await suite.client.request(CheckLimitsBatchDocument, { requests: Array.from({ length: 1001 }, () => request) });
    expect(response.data).toBeNull();
    expectBadUserInput(response.errors, "requests");
    expectNoStackTrace(response);
    expect((await check(suite.client, request)).remaining).toBe(4);
  });

  it("accepts exactly 1000 requests", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 990);
    const requests = Array.from({ length: 1000 }, () => ({ tenantId, userId: "u1" }));
    const { checkLimitsBatch } = await suite.client.data(CheckLimitsBatchDocument, { requests });
    expect(checkLimitsBatch).toHaveLength(1000);
    expect(checkLimitsBatch.filter((d) => d.allowed)).toHaveLength(990);
    expect(checkLimitsBatch[989]!.allowed).toBe(true);
    expect(checkLimitsBatch[990]!.allowed).toBe(false);
  });

  /** The operation-wide cap's refusal: BAD_USER_INPUT naming requests and the cap, no data. */
  function expectTooManyChecks(response: { data?: unknown; errors?: readonly GraphQLFormattedError[] }, checks: number) {
    expect(response.data).toBeNull();
    expectBadUserInput(response.errors, "requests");
    expect(response.errors?.[0]?.message).toBe(
      `requests must hold at most 1000 checks in one operation: every checkLimits field and every request of every checkLimitsBatch counts, aliases included (got ${checks})`,
    );
    expectNoStackTrace(response);
  }

  it("refuses 40 aliased batches sharing one 1,000-entry variable (40,000 checks) with BAD_USER_INPUT naming the cap, and consumes nothing", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 5);
    const request = { tenantId, userId: "u1" };
    const query = `query Many($r: [CheckLimitsInput!]!) { ${Array.from({ length: 40 }, (_, i) => `b${i}: checkLimitsBatch(requests: $r) { allowed }`).join(" ")} }`;
    expectTooManyChecks(await suite.client.raw({ query, variables: { r: Array.from({ length: 1000 }, () => request) } }), 40_000);
    expect((await check(suite.client, request)).remaining).toBe(4);
  });

  it("refuses 1,001 aliased checkLimits (they pass the field limit), and consumes nothing", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 5);
    const query = `{ ${Array.from({ length: 1001 }, (_, i) => `c${i}: checkLimits(request: { tenantId: "${tenantId}", userId: "u1" }) { allowed }`).join(" ")} }`;
    expectTooManyChecks(await suite.client.raw({ query }), 1001);
    expect((await check(suite.client, { tenantId, userId: "u1" })).remaining).toBe(4);
  });

  it("counts a batch's literal list, a default value and single checks together: 1,000 pass, 1,001 are refused", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 2000);
    const request = { tenantId, userId: "u1" };
    const literal = (n: number) => `[${Array.from({ length: n }, () => `{ tenantId: "${tenantId}", userId: "u1" }`).join(", ")}]`;
    const query = (single: number) =>
      `query Mixed($r: [CheckLimitsInput!]! = ${literal(300)}) { a: checkLimitsBatch(requests: ${literal(400)}) { allowed } b: checkLimitsBatch(requests: $r) { allowed } ${Array.from(
        { length: single },
        (_, i) => `c${i}: checkLimits(request: { tenantId: "${tenantId}", userId: "u1" }) { allowed }`,
      ).join(" ")} }`;
    expectTooManyChecks(await suite.client.raw({ query: query(301) }), 1001);
    expect((await check(suite.client, request)).remaining).toBe(1999);
    const admitted = await suite.client.raw<Record<string, unknown>>({ query: query(300) });
    expect(admitted.errors).toBeUndefined();
    expect((await check(suite.client, request)).remaining).toBe(1998 - 1000);
  });

  it("applies two aliased checkLimits of one query in order", async () => {
    const tenantId = newTenant();
    await perUserRule(tenantId, 1);
    const request = { tenantId, userId: "u1" };
    const { first, second } = await suite.client.data(CheckTwoAliasedDocument, { first: request, second: request });
    expect(first.allowed).toBe(true);
    expect(second.allowed).toBe(false);
  });
});

describe("one round trip per operation (schema executed in-process)", () => {
  let schema: GraphQLSchema;
  let services: Services;
  let store: CountingCounterStore;
  let events: InProcessEventBus;
  let sync: RuleSync;

  beforeAll(async () => {
    events = new InProcessEventBus();
    store = new CountingCounterStore(new MemoryCounterStore({ sweepIntervalMs: 0 }));
    const book = new RuleBook();
    const repository = new InMemoryRuleRepository();
    const rules = new RuleService(repository, book, store, events, systemClock);
    sync = inProcessRuleSync(book, repository, events);
    await sync.start();
    services = {
      rules,
      limiter: new Limiter(book, store, events, systemClock),
      events,
      // Authentication and the admin limit belong to the HTTP server, which these in-process operations bypass.
      keys: {} as ApiKeyService,
      mutations: {} as MutationLimiter,
      // Usage, health, access lists and bans are read by queries these tests do not make.
      usage: {} as UsageService,
      accessLists: {} as Services["accessLists"],
      bans: {} as BanService,
      health: {} as Services["health"],
    };
    schema = await buildApiSchema(events);
  });

  afterAll(async () => {
    sync?.close();
    await store?.close();
    await events?.close();
  });

  /** Runs one operation as the server would: a fresh context per operation. */
  async function run<T>(document: Parameters<typeof execute>[0]["document"], variableValues: Record<string, unknown>): Promise<T> {
    const result = (await execute({ schema, document, variableValues, contextValue: createContext(services, BOOTSTRAP, "test") })) as ExecutionResult<T>;
    expect(result.errors).toBeUndefined();
    return result.data!;
  }

  /** A tenant with a per-user rule of the given limit; the store's call log starts empty afterwards. */
  async function tenantWithRule(limit: number): Promise<string> {
    const tenantId = newTenant();
    const input = { tenantId, name: "per-user", scope: ["USER"], limit, window: 1, windowUnit: "MINUTES" };
    await run<CreateRuleMutation>(CreateRuleDocument, { input });
    store.decideSizes.length = 0;
    return tenantId;
  }

  it("sends the three checks of a checkLimitsBatch to the store in one decide() call of 3", async () => {
    const tenantId = await tenantWithRule(2);
    const request = { tenantId, userId: "u1" };
    const data = await run<CheckLimitsBatchQuery>(CheckLimitsBatchDocument, { requests: [request, request, request] });
    expect(store.decideSizes).toEqual([3]);
    expect(data.checkLimitsBatch.map((d) => d.allowed)).toEqual([true, true, false]);
  });

  it("sends two aliased checkLimits of one query to the store in one decide() call of 2", async () => {
    const tenantId = await tenantWithRule(1);
    const request = { tenantId, userId: "u1" };
    const data = await run<CheckTwoAliasedQuery>(CheckTwoAliasedDocument, { first: request, second: request });
    expect(store.decideSizes).toEqual([2]);
    expect([data.first.allowed, data.second.allowed]).toEqual([true, false]);
  });

  it("sends a batch and a single check of one query to the store together", async () => {
    const tenantId = await tenantWithRule(10);
    const request = { tenantId, userId: "u1" };
    const data = await run<CheckBatchAndSingleQuery>(CheckBatchAndSingleDocument, { requests: [request, request, request], single: request });
    expect(store.decideSizes).toEqual([4]);
    expect([...data.batch.map((d) => d.remaining), data.single.remaining].sort()).toEqual([6, 7, 8, 9]);
  });

  it("sends a batch of the maximum 1000 checks in one decide() call", async () => {
    const tenantId = await tenantWithRule(2000);
    const requests = Array.from({ length: 1000 }, (_, i) => ({ tenantId, userId: `u${i}` }));
    const data = await run<CheckLimitsBatchQuery>(CheckLimitsBatchDocument, { requests });
    expect(store.decideSizes).toEqual([1000]);
    expect(data.checkLimitsBatch.every((d) => d.allowed)).toBe(true);
  });

  it("refuses an operation past 1,000 checks in all before any of them reaches the store", async () => {
    const tenantId = await tenantWithRule(5000);
    const requests = Array.from({ length: 600 }, (_, i) => ({ tenantId, userId: `u${i}` }));
    const result = await execute({
      schema,
      document: parse("query Two($r: [CheckLimitsInput!]!) { a: checkLimitsBatch(requests: $r) { allowed } b: checkLimitsBatch(requests: $r) { allowed } }"),
      variableValues: { r: requests },
      contextValue: createContext(services, BOOTSTRAP, "test"),
    });
    expect(result.data).toBeNull();
    expect(result.errors?.map((e) => e.message)).toEqual([
      "requests must hold at most 1000 checks in one operation: every checkLimits field and every request of every checkLimitsBatch counts, aliases included (got 1200)",
    ]);
    expect(result.errors?.[0]?.originalError).toBeInstanceOf(ValidationError);
    expect(store.decideSizes).toEqual([]);
  });

  it("hands the limiter at most 1,000 checks at a time, however many one context is given", async () => {
    const tenantId = await tenantWithRule(5000);
    const context = createContext(services, BOOTSTRAP, "test");
    const decisions = await context.check(Array.from({ length: 1001 }, (_, i) => parseCheckRequest({ tenantId, userId: `u${i}` })));
    expect(decisions).toHaveLength(1001);
    expect(store.decideSizes).toEqual([1000, 1]);
  });

  it("does not call the store for checks that no rule applies to", async () => {
    store.decideSizes.length = 0;
    const request = { tenantId: newTenant(), userId: "u1" };
    const data = await run<CheckTwoAliasedQuery>(CheckTwoAliasedDocument, { first: request, second: request });
    expect(store.decideSizes).toEqual([]);
    expect([data.first.allowed, data.second.allowed]).toEqual([true, true]);
  });

  it("sends only the checks some rule applies to, still in one call", async () => {
    const tenantId = await tenantWithRule(5);
    const requests = [{ tenantId, userId: "u1" }, { tenantId: newTenant(), userId: "u1" }, { tenantId, userId: "u2" }];
    const data = await run<CheckLimitsBatchQuery>(CheckLimitsBatchDocument, { requests });
    expect(store.decideSizes).toEqual([2]);
    expect(data.checkLimitsBatch.map((d) => d.remaining)).toEqual([4, null, 4]);
  });
});
