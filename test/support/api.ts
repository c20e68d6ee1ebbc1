/** Helpers shared by the suites that run operations against a started app (API, fleet, security, client, middleware): unique tenants, error assertions, rule inputs. */

import { randomUUID } from "node:crypto";
import type { GraphQLFormattedError } from "graphql";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { CheckLimitsDocument, CreateRuleDocument, type CheckLimitsInput, type CreateRuleInput } from "../generated/graphql.js";
import { startTestApp } from "./app.js";
import type { TestApp } from "../harness/in-process-app.js";
import type { GraphQLClient } from "../harness/graphql-client.js";
import { postgresAvailable, redisAvailable } from "./services.js";

export const STORAGES = ["embedded", "real"] as const;

/** Whether the "real" suites can run: Redis and Postgres both reachable (under CI=true an unreachable one fails instead). */
export async function realStorageAvailable(): Promise<boolean> {
  return (await redisAvailable()) && (await postgresAvailable());
}

/** The app a suite runs against, started before its first case and stopped after its last. */
export interface Suite {
  t: TestApp;
  client: GraphQLClient;
}

/** Defines the suite once per storage (the real one only when it is reachable), each against an app of its own. */
export async function describeOnEachStorage(title: string, cases: (suite: Suite) => void): Promise<void> {
  const realAvailable = await realStorageAvailable();
  for (const storage of STORAGES) {
    describe.runIf(storage === "embedded" || realAvailable)(`${title} (${storage})`, () => {
      const suite = {} as Suite;
      beforeAll(async () => {
        suite.t = await startTestApp(storage);
        suite.client = suite.t.client;
      });
      afterAll(async () => {
        await suite.t?.stop();
      });
      cases(suite);
    });
  }
}

export function newTenant(): string {
  return `t-${randomUUID()}`;
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * A stack trace in any form: a "stacktrace" extension, or V8 frames such as
 * "at fn (/x/y.js:1:2)" / "at /x/y.js:1:2". Plain " at " is not enough, since
 * honest messages say "must be at least 1".
 */
const STACK_FRAME = /\bat (?:[^\s"()]+ )?\(?(?:file:\/\/|node:|\/)[^\s"()]*:\d+:\d+\)?/;

export function expectNoStackTrace(response: unknown): void {
  const text = typeof response === "string" ? response : JSON.stringify(response);
  expect(text.toLowerCase()).not.toContain("stacktrace");
  expect(text).not.toMatch(STACK_FRAME);
  expect(text).not.toMatch(/\\n\s+at /);
}

/** The single error of a failed operation. */
export function onlyError(errors: readonly GraphQLFormattedError[] | undefined): GraphQLFormattedError {
  expect(errors, "expected the operation to fail").toBeDefined();
  expect(errors).toHaveLength(1);
  return errors![0]!;
}

export function expectBadUserInput(errors: readonly GraphQLFormattedError[] | undefined, field: string): void {
  const error = onlyError(errors);
  expect(error.extensions?.code).toBe("BAD_USER_INPUT");
  expect(error.extensions?.field).toBe(field);
  expect(error.message).toContain(field);
}

export function expectCode(errors: readonly GraphQLFormattedError[] | undefined, code: string): void {
  expect(onlyError(errors).extensions?.code).toBe(code);
}

export function header(headers: readonly { name: string; value: string }[], name: string): string | undefined {
  return headers.find((h) => h.name.toLowerCase() === name.toLowerCase())?.value;
}

export async function createRule(client: GraphQLClient, input: CreateRuleInput) {
  return (await client.data(CreateRuleDocument, { input })).createRule;
}

export async function check(client: GraphQLClient, request: CheckLimitsInput) {
  return (await client.data(CheckLimitsDocument, { request })).checkLimits;
}

/** The first write and check of an instance open its connections: a fleet test warms each up to measure propagation, not start-up. */
export async function warmUp(apps: readonly TestApp[]): Promise<void> {
  for (const instance of apps) {
    const tenantId = newTenant();
    await createRule(instance.client, { tenantId, name: "warm-up", limit: 1, window: 1 });
    await check(instance.client, { tenantId });
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
