import { describe, expect, it } from "vitest";
import { MINUTE_MS, USAGE_RETENTION_MS } from "../../src/domain/usage.js";
import { MemoryUsageStore } from "../../src/store/memory/memory-usage-store.js";
import { usageStoreConformance } from "./usage-store.conformance.js";

usageStoreConformance("memory", async () => ({ store: new MemoryUsageStore(), cleanup: async () => {} }));

describe("memory usage store", () => {
  it("forgets a minute once a batch comes more than the retention after it, as Redis lets its keys expire", async () => {
    const store = new MemoryUsageStore();
    const t0 = Date.UTC(2026, 10, 30, 12, 0, 0);
    const counts = { allowed: 1, refused: 1, shadowRefused: 0 };
    await store.add({ instanceId: "i1", atMs: t0, rules: [{ ruleId: "r1", tenantId: "acme", minuteMs: t0, counts }], buckets: [{ tenantId: "acme", ruleId: "r1", key: "user:a", minuteMs: t0, refusals: 1 }] });
    await store.add({ instanceId: "i1", atMs: t0 + USAGE_RETENTION_MS, rules: [], buckets: [] });
    expect(await store.ruleUsage("r1", "acme", [t0])).toEqual([counts]);
    await store.add({ instanceId: "i1", atMs: t0 + USAGE_RETENTION_MS + MINUTE_MS + 1, rules: [], buckets: [] });
    expect(await store.ruleUsage("r1", "acme", [t0])).toEqual([{ allowed: 0, refused: 0, shadowRefused: 0 }]);
    expect(await store.topBuckets("acme", [t0], 10)).toEqual([]);
  });
});
