/**
 * One conformance suite for every usage store: batches of several instances
 * add up, reads see only the tenant they name (or every tenant for null),
 * minutes are kept for USAGE_RETENTION_MS, sorted sets keep the most refused
 * buckets. A store reads no clock (each batch says when it was made), but
 * Redis expires keys on its own: times are minutes of the last hour.
 */

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { UsageStore } from "../../src/domain/ports.js";
import { MAX_STORED_BUCKETS, MINUTE_MS, USAGE_RETENTION_MS, type UsageBatch } from "../../src/domain/usage.js";

export interface UsageStoreUnderTest {
  store: UsageStore;
  cleanup(): Promise<void>;
}

/** Ten minutes ago, at a minute's start. */
const T0 = Date.now() - (Date.now() % MINUTE_MS) - 10 * MINUTE_MS;
const M1 = T0 + MINUTE_MS;

function batch(instanceId: string, atMs: number, parts: Partial<Omit<UsageBatch, "instanceId" | "atMs">>): UsageBatch {
  return { instanceId, atMs, rules: parts.rules ?? [], buckets: parts.buckets ?? [] };
}

function counts(allowed: number, refused: number, shadowRefused: number) {
  return { allowed, refused, shadowRefused };
}

export function usageStoreConformance(name: string, factory: () => Promise<UsageStoreUnderTest>): void {
  describe(`${name} usage store conformance`, () => {
    let subject: UsageStoreUnderTest;
    let store: UsageStore;

    beforeEach(async () => {
      subject = await factory();
      store = subject.store;
    });
    afterEach(() => subject.cleanup());

    it("adds the batches of every instance, per minute, and reads zeros for a minute without any", async () => {
      await store.add(batch("i1", T0 + 5_000, { rules: [{ ruleId: "r1", tenantId: "acme", minuteMs: T0, counts: counts(3, 2, 0) }] }));
      await store.add(batch("i2", T0 + 6_000, { rules: [{ ruleId: "r1", tenantId: "acme", minuteMs: T0, counts: counts(4, 0, 1) }] }));
      await store.add(batch("i1", M1 + 1_000, { rules: [{ ruleId: "r1", tenantId: "acme", minuteMs: M1, counts: counts(1, 0, 0) }] }));
      expect(await store.ruleUsage("r1", "acme", [T0 - MINUTE_MS, T0, M1])).toEqual([counts(0, 0, 0), counts(7, 2, 1), counts(1, 0, 0)]);
      expect(await store.ruleUsage("r2", "acme", [T0])).toEqual([counts(0, 0, 0)]);
    });

    it("sums a rule's counts over the tenant named, or over every tenant for null", async () => {
      await store.add(
        batch("i1", T0, {
          rules: [
            { ruleId: "star", tenantId: "acme", minuteMs: T0, counts: counts(5, 1, 0) },
            { ruleId: "star", tenantId: "globex", minuteMs: T0, counts: counts(2, 3, 4) },
          ],
        }),
      );
      expect(await store.ruleUsage("star", "acme", [T0])).toEqual([counts(5, 1, 0)]);
      expect(await store.ruleUsage("star", "globex", [T0])).toEqual([counts(2, 3, 4)]);
      expect(await store.ruleUsage("star", "initech", [T0])).toEqual([counts(0, 0, 0)]);
      expect(await store.ruleUsage("star", null, [T0])).toEqual([counts(7, 4, 4)]);
    });

    it("ranks buckets by their refusals summed over the minutes, within the tenant or over all of them", async () => {
      await store.add(
        batch("i1", T0, {
          buckets: [
            { tenantId: "acme", ruleId: "r1", key: "user:a", minuteMs: T0, refusals: 5 },
            { tenantId: "acme", ruleId: "r1", key: "user:b", minuteMs: T0, refusals: 7 },
            { tenantId: "globex", ruleId: "r2", key: "user:a", minuteMs: T0, refusals: 9 },
          ],
        }),
      );
      await store.add(batch("i2", M1, { buckets: [{ tenantId: "acme", ruleId: "r1", key: "user:a", minuteMs: M1, refusals: 4 }] }));
      expect(await store.topBuckets("acme", [T0, M1], 10)).toEqual([
        { tenantId: "acme", ruleId: "r1", key: "user:a", refusals: 9 },
        { tenantId: "acme", ruleId: "r1", key: "user:b", refusals: 7 },
      ]);
      expect(await store.topBuckets("acme", [M1], 10)).toEqual([{ tenantId: "acme", ruleId: "r1", key: "user:a", refusals: 4 }]);
      expect(await store.topBuckets(null, [T0, M1], 2)).toEqual([
        { tenantId: "acme", ruleId: "r1", key: "user:a", refusals: 9 },
        { tenantId: "globex", ruleId: "r2", key: "user:a", refusals: 9 },
      ]);
      expect(await store.topBuckets("initech", [T0, M1], 10)).toEqual([]);
      expect(await store.topBuckets("acme", [], 10)).toEqual([]);
    });

    it(`keeps the ${MAX_STORED_BUCKETS} most refused buckets of a tenant's minute`, async () => {
      const buckets = Array.from({ length: MAX_STORED_BUCKETS + 5 }, (_, i) => ({ tenantId: "acme", ruleId: "r1", key: `user:${i}`, minuteMs: T0, refusals: i + 1 }));
      await store.add(batch("i1", T0, { buckets }));
      const top = await store.topBuckets("acme", [T0], 100);
      expect(top[0]).toEqual({ tenantId: "acme", ruleId: "r1", key: `user:${MAX_STORED_BUCKETS + 4}`, refusals: MAX_STORED_BUCKETS + 5 });
      const all = await store.topBuckets("acme", [T0], MAX_STORED_BUCKETS + 5);
      expect(all).toHaveLength(MAX_STORED_BUCKETS);
      expect(all.at(-1)!.refusals).toBe(6);
    });

    it("counts the instances whose last batch is recent enough", async () => {
      await store.add(batch("i1", T0, {}));
      await store.add(batch("i2", T0 + 4_000, {}));
      await store.add(batch("i1", T0 + 5_000, {}));
      expect(await store.instancesSince(T0 + 4_000)).toBe(2);
      expect(await store.instancesSince(T0 + 4_001)).toBe(1);
      expect(await store.instancesSince(T0 + 5_001)).toBe(0);
    });

    it("forgets instances silent for longer than the retention", async () => {
      await store.add(batch("i1", T0 - USAGE_RETENTION_MS - 1, {}));
      await store.add(batch("i2", T0, {}));
      expect(await store.instancesSince(0)).toBe(1);
    });
  });
}
