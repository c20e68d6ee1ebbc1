/**
 * What the checks' fast path keeps, and for whom. A probe of 300 distinct
 * 100 KB documents of 2,400 aliased checkLimits, sent without a token, grew
 * the heap to 4 GB and crashed V8: each was compiled (20 to 65 MB) and kept
 * before anyone was authenticated. Now a caller without a valid token, or
 * without the right to check, has nothing parsed, compiled or kept, and what
 * authenticated checkers send is kept within FAST_PATH_CACHE_BYTES. The cache
 * is observed where an operator sees it (GET /metrics) and its compilations
 * are counted at the fast path's own compile step.
 */

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CompiledChecks } from "../../../src/api/fast-path/compiled-checks.js";
import { CreateApiKeyDocument } from "../../generated/graphql.js";
import { startTestApp } from "../../support/app.js";
import type { TestApp } from "../../harness/in-process-app.js";

const CACHE_BYTES = 1 << 20;

/** Every compilation the fast path attempts (parse, validate, compile). */
const compilations = vi.spyOn(CompiledChecks.prototype as unknown as { compile: (...args: unknown[]) => unknown }, "compile");

/** The probe's document: `count` aliased checkLimits, about 42 bytes each, made distinct by `tag`. */
function aliasedChecks(count: number, tag: string): string {
  return `{ ${Array.from({ length: count }, (_, i) => `c${i}: checkLimits(request: { tenantId: "${tag}" }) { allowed }`).join(" ")} }`;
}

describe(`the fast path's cache (FAST_PATH_CACHE_BYTES=${CACHE_BYTES})`, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp("embedded", { FAST_PATH_CACHE_BYTES: String(CACHE_BYTES) });
  });
  afterAll(() => t?.stop());
  afterEach(() => {
    compilations.mockClear();
  });

  async function post(query: string, authorization?: string): Promise<{ status: number; body: string }> {
    const response = await fetch(t.app.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization === undefined ? {} : { authorization }) },
      body: JSON.stringify({ query }),
    });
    return { status: response.status, body: await response.text() };
  }

  /** The fast path's gauges at GET /metrics. */
  async function cache(): Promise<{ documents: number; bytes: number }> {
    const metrics = await (await fetch(new URL("/metrics", t.app.url), { headers: { authorization: `Bearer ${t.adminToken}` } })).text();
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(metrics)?.[1]);
    return { documents: gauge("floodgate_fast_path_documents"), bytes: gauge("floodgate_fast_path_bytes") };
  }

  it("compiles and keeps nothing for 100 distinct 100 KB documents of 2,400 aliased checks sent without a token or with a wrong one, each answered 401", async () => {
    for (let i = 0; i < 100; i++) {
      const query = aliasedChecks(2_400, `probe-${i}`);
      expect(query.length).toBeGreaterThan(100_000);
      const answer = await post(query, i % 2 === 0 ? undefined : "Bearer fg_not-a-key");
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body)).toEqual({
        errors: [
          {
            message: i % 2 === 0 ? "authentication required: send Authorization: Bearer <API key or ADMIN_TOKEN>" : "the token is not a valid API key (unknown or revoked)",
            extensions: { code: "UNAUTHENTICATED" },
          },
        ],
      });
      expect(compilations).not.toHaveBeenCalled();
    }
    expect(await cache()).toEqual({ documents: 0, bytes: 0 });
  });

  it("compiles and keeps nothing for a caller without the right to check (a VIEWER), whose checks are FORBIDDEN", async () => {
    const { createApiKey } = await t.client.data(CreateApiKeyDocument, { input: { tenantId: "acme", role: "VIEWER", name: "viewer" } });
    for (let i = 0; i < 20; i++) {
      const answer = await post(aliasedChecks(10, "acme"), `Bearer ${createApiKey.secret}`);
      expect(JSON.parse(answer.body).errors[0].extensions.code).toBe("FORBIDDEN");
    }
    expect(compilations).not.toHaveBeenCalled();
    expect(await cache()).toEqual({ documents: 0, bytes: 0 });
  });

  it("keeps what authenticated checkers send within its byte bound, least recently used dropped first, and answers all of it", async () => {
    const kept: number[] = [];
    for (let i = 0; i < 30; i++) {
      const answer = await post(aliasedChecks(10, `bounded-${i}`), `Bearer ${t.adminToken}`);
      expect(JSON.parse(answer.body)).toEqual({ data: Object.fromEntries(Array.from({ length: 10 }, (_, j) => [`c${j}`, { allowed: true }])) });
      const { documents, bytes } = await cache();
      expect(bytes).toBeLessThanOrEqual(CACHE_BYTES);
      kept.push(documents);
    }
    expect(compilations).toHaveBeenCalledTimes(30);
    expect(compilations.mock.results.every((result) => result.value !== null)).toBe(true);
    // Each is estimated at about 130 KiB (20 fields): the cache fills with a few and stays full.
    const full = kept.at(-1)!;
    expect(full).toBeGreaterThan(1);
    expect(full).toBeLessThan(10);
    expect(kept.slice(full)).toEqual(Array(30 - full).fill(full));
  });

  it("answers through Apollo a document heavier than the whole bound, keeping only its text", async () => {
    const before = await cache();
    // 300 fields, estimated at 1.8 MiB.
    const query = aliasedChecks(150, "too-heavy");
    const answer = await post(query, `Bearer ${t.adminToken}`);
    expect(Object.keys(JSON.parse(answer.body).data)).toHaveLength(150);
    expect(compilations.mock.results.map((result) => result.value)).toEqual([null]);
    const after = await cache();
    expect(after.bytes).toBeLessThanOrEqual(CACHE_BYTES);
    expect(after.documents).toBeLessThanOrEqual(before.documents + 1);
  });
});
