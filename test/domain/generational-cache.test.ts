import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GenerationalCache } from "../../src/domain/generational-cache.js";

const key = fc.constantFrom("a", "b", "c", "d", "e", "f", "g");

describe("GenerationalCache", () => {
  it("answers a key's latest value or nothing, within its entries and weight, on every sequence of operations", () => {
    const operation = fc.oneof(
      fc.record({ op: fc.constant("get" as const), key }),
      fc.record({ op: fc.constant("set" as const), key, value: fc.integer({ min: 0, max: 12 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 0, max: 30 }), fc.array(operation, { maxLength: 80 }), (maxEntries, maxWeight, ops) => {
        const latest = new Map<string, number>();
        // An entry weighs its value.
        const cache = new GenerationalCache<string, number>({ maxEntries, maxWeight, weigh: (_k, v) => v });
        for (const step of ops) {
          if (step.op === "set") {
            latest.set(step.key, step.value);
            // Whatever it held of the key is replaced, or dropped when the new value is too heavy: never answered again.
            expect(cache.set(step.key, step.value)).toBe(step.value <= maxWeight / 2);
          } else {
            const value = cache.get(step.key);
            if (value !== undefined) expect(value).toBe(latest.get(step.key));
          }
          expect(cache.size).toBeLessThanOrEqual(maxEntries);
          expect(cache.weight).toBeLessThanOrEqual(maxWeight);
        }
        const held = [...latest.keys()].filter((k) => cache.has(k));
        expect(cache.size).toBe(held.length);
        expect(cache.weight).toBe(held.reduce((sum, k) => sum + latest.get(k)!, 0));
      }),
      { numRuns: 500 },
    );
  });

  it("keeps an entry used at least once a generation however many others come and go", () => {
    const cache = new GenerationalCache<string, number>({ maxEntries: 10, maxWeight: 1_000, weigh: () => 1 });
    cache.set("hot", 1);
    for (let i = 0; i < 1_000; i++) {
      cache.set(`cold-${i}`, i);
      expect(cache.get("hot")).toBe(1);
    }
    expect(cache.size).toBeLessThanOrEqual(10);
  });

  it("drops an entry not used for two generations", () => {
    const cache = new GenerationalCache<string, number>({ maxEntries: 4, maxWeight: 1_000, weigh: () => 1 });
    cache.set("once", 1);
    for (let i = 0; i < 4; i++) cache.set(`other-${i}`, i);
    expect(cache.get("once")).toBeUndefined();
  });

  it("refuses fewer than two entries", () => {
    expect(() => new GenerationalCache({ maxEntries: 1, maxWeight: 10, weigh: () => 1 })).toThrow(RangeError);
  });
});
