import { afterEach, describe, expect, it } from "vitest";
import type { UsageStore } from "../../../src/domain/ports.js";
import { MAX_TRACKED_BUCKETS, MINUTE_MS, OTHER_BUCKETS, type UsageBatch } from "../../../src/domain/usage.js";
import { UsageRecorder } from "../../../src/engine/usage/usage-recorder.js";
import { MemoryUsageStore } from "../../../src/store/memory/memory-usage-store.js";
import { ManualClock } from "../../support/clock.js";

/** 2026-11-30T12:00:00Z. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
/** Longer than any test: flushes happen when a test calls flush(). */
const NEVER = 3_600_000;

describe("usage recorder", () => {
  const recorders: UsageRecorder[] = [];
  afterEach(async () => {
    for (const recorder of recorders.splice(0)) await recorder.close();
  });

  function recorderOn(store: UsageStore, onFlushFailed?: (error: unknown) => void): UsageRecorder {
    const recorder = new UsageRecorder({ store, clock: new ManualClock(T0), instanceId: "i1", flushMs: NEVER, onFlushFailed });
    recorders.push(recorder);
    return recorder;
  }

  it("keeps each minute's counts apart, per rule and request tenant, and empties itself on a flush", async () => {
    const store = new MemoryUsageStore();
    const recorder = recorderOn(store);
    recorder.count("acme", "r1", "user:a", "allowed", T0 + 1_000);
    recorder.count("acme", "r1", "user:a", "refused", T0 + 59_999);
    recorder.count("globex", "r1", "user:a", "shadowRefused", T0 + 2_000);
    recorder.count("acme", "r1", "user:a", "allowed", T0 + MINUTE_MS);
    await recorder.flush();
    await recorder.flush();
    expect(await store.ruleUsage("r1", "acme", [T0, T0 + MINUTE_MS])).toEqual([
      { allowed: 1, refused: 1, shadowRefused: 0 },
      { allowed: 1, refused: 0, shadowRefused: 0 },
    ]);
    expect(await store.ruleUsage("r1", null, [T0])).toEqual([{ allowed: 1, refused: 1, shadowRefused: 1 }]);
    expect(await store.topBuckets(null, [T0], 10)).toEqual([
      { tenantId: "acme", ruleId: "r1", key: "user:a", refusals: 1 },
      { tenantId: "globex", ruleId: "r1", key: "user:a", refusals: 1 },
    ]);
  });

  it(`counts the refusals of buckets beyond ${MAX_TRACKED_BUCKETS} a flush under "${OTHER_BUCKETS}", keeping the totals`, async () => {
    const batches: UsageBatch[] = [];
    const recorder = recorderOn({ add: async (batch) => void batches.push(batch) } as UsageStore);
    for (let i = 0; i < MAX_TRACKED_BUCKETS + 3; i++) recorder.count("acme", "r1", `user:${i}`, "refused", T0);
    recorder.count("acme", "r1", "user:0", "refused", T0);
    await recorder.flush();
    const buckets = batches[0]!.buckets;
    expect(buckets).toHaveLength(MAX_TRACKED_BUCKETS + 1);
    expect(buckets.find((b) => b.key === OTHER_BUCKETS)!.refusals).toBe(3);
    expect(buckets.find((b) => b.key === "user:0")!.refusals).toBe(2);
    expect(buckets.reduce((sum, b) => sum + b.refusals, 0)).toBe(MAX_TRACKED_BUCKETS + 4);
  });

  it("drops a batch the store refuses, reporting it, and starts afresh", async () => {
    const failures: unknown[] = [];
    const batches: UsageBatch[] = [];
    let down = true;
    const recorder = recorderOn(
      {
        add: async (batch) => {
          if (down) throw new Error("store down");
          batches.push(batch);
        },
      } as UsageStore,
      (error) => failures.push(error),
    );
    recorder.count("acme", "r1", "user:a", "allowed", T0);
    await recorder.flush();
    expect(failures).toEqual([new Error("store down")]);
    down = false;
    recorder.count("acme", "r1", "user:a", "refused", T0);
    await recorder.flush();
    expect(batches.map((batch) => batch.rules)).toEqual([[{ ruleId: "r1", tenantId: "acme", minuteMs: T0, counts: { allowed: 0, refused: 1, shadowRefused: 0 } }]]);
  });

  it("sends a batch without counts too: the store counts the instances alive by them", async () => {
    const store = new MemoryUsageStore();
    await recorderOn(store).flush();
    expect(await store.instancesSince(T0)).toBe(1);
  });
});
