import { describe, expect, it } from "vitest";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { counterStoreConformance } from "./counter-store.conformance.js";

counterStoreConformance("memory", async (clock) => {
  const store = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
  return { store, cleanup: () => store.close() };
});

describe("memory counter store", () => {
  it("sweeps buckets whose state can no longer change a decision", async () => {
    const clock = new ManualClock();
    const store = new MemoryCounterStore({ clock, sweepIntervalMs: 0 });
    const params = { algorithm: "FIXED_WINDOW", limit: 5, windowMs: 1_000, capacity: 5, action: "REJECT" } as const;
    await store.decide([{ buckets: [{ ruleId: "r", key: "user:a", params }], cost: 1, dryRun: false }]);
    await store.decide([{ buckets: [{ ruleId: "r", key: "user:b", params }], cost: 1, dryRun: false }]);
    expect(store.size).toBe(2);
    clock.advance(1_999);
    expect(store.sweep()).toBe(0);
    clock.advance(1);
    expect(store.sweep()).toBe(2);
    expect(store.size).toBe(0);
    await store.close();
  });
});
