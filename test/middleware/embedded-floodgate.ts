/**
 * What the middleware's smaller test files share: one embedded Floodgate for a
 * file (the middleware behaves alike on either storage; middleware.test.ts
 * covers both), a tenant of its own per test with one rule, a CHECKER key's
 * client, and the apps started, closed after each test.
 */

import { afterAll, afterEach, beforeAll } from "vitest";
import type { FloodgateClient, FloodgateClientOptions } from "floodgate/client";
import type { CreateRuleInput } from "../generated/graphql.js";
import { createRule, newTenant } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { apiKey, patientClient } from "../support/floodgate-clients.js";
import type { TestApp } from "../harness/in-process-app.js";

export interface EmbeddedFloodgate {
  /** A tenant of its own limited by `rule` (a minute's window unless it says), and a client checking it (with `clientOptions`). */
  limited(
    rule: Omit<CreateRuleInput, "tenantId" | "name" | "window" | "windowUnit"> & { window?: number; windowUnit?: CreateRuleInput["windowUnit"] },
    clientOptions?: Partial<FloodgateClientOptions>,
  ): Promise<{ tenant: string; client: FloodgateClient }>;
  /** Closes `thing` after the test. */
  keep<T extends { close(): Promise<void> }>(thing: T): T;
}

export function embeddedFloodgate(): EmbeddedFloodgate {
  let floodgate: TestApp;
  const running: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    floodgate = await startTestApp("embedded");
  });
  afterAll(async () => {
    await floodgate?.stop();
  });
  afterEach(async () => {
    for (const thing of running.splice(0).reverse()) await thing.close();
  });
  const keep = <T extends { close(): Promise<void> }>(thing: T): T => {
    running.push(thing);
    return thing;
  };
  return {
    keep,
    async limited(rule, clientOptions) {
      const tenant = newTenant();
      await createRule(floodgate.client, { tenantId: tenant, name: "limit", windowUnit: "MINUTES", ...rule, window: rule.window ?? 1 });
      const client = keep(patientClient(floodgate.app.url, await apiKey(floodgate.client, tenant), clientOptions));
      return { tenant, client };
    },
  };
}
