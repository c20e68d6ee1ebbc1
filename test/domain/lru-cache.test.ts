import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LruCache } from "../../src/domain/lru-cache.js";

/** The obvious model: an array of [key, value, weight] from least to most recently used. */
class ModelLru {
  entries: [string, number, number][] = [];
  constructor(
    private readonly maxEntries: number,
    private readonly maxWeight: number,
  ) {}
  get(key: string): number | undefined {
    const at = this.entries.findIndex(([k]) => k === key);
    if (at === -1) return undefined;
    const [entry] = this.entries.splice(at, 1);
    this.entries.push(entry!);
    return entry![1];
  }
  set(key: string, value: number, weight: number): boolean {
    this.delete(key);
    if (weight > this.maxWeight) return false;
    this.entries.push([key, value, weight]);
    while (this.entries.length > this.maxEntries || this.weight() > this.maxWeight) this.entries.shift();
    return true;
  }
  delete(key: string): boolean {
    const at = this.entries.findIndex(([k]) => k === key);
    if (at === -1) return false;
    this.entries.splice(at, 1);
    return true;
  }
  weight(): number {
    return this.entries.reduce((sum, [, , w]) => sum + w, 0);
  }
}

const key = fc.constantFrom("a", "b", "c", "d", "e", "f", "g");
const operation = fc.oneof(
  fc.record({ op: fc.constant("get" as const), key }),
  fc.record({ op: fc.constant("peek" as const), key }),
  fc.record({ op: fc.constant("delete" as const), key }),
  fc.record({ op: fc.constant("set" as const), key, value: fc.integer(), weight: fc.integer({ min: 0, max: 12 }) }),
);

describe("LruCache", () => {
  it("agrees with the obvious model on every sequence of operations, by entries and by weight", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 30 }), fc.array(operation, { maxLength: 80 }), (maxEntries, maxWeight, ops) => {
        const weights = new Map<string, number>();
        const lru = new LruCache<string, number>({ maxEntries, maxWeight, weigh: (k) => weights.get(k)! });
        const model = new ModelLru(maxEntries, maxWeight);
        for (const step of ops) {
          if (step.op === "set") {
            weights.set(step.key, step.weight);
            expect(lru.set(step.key, step.value)).toBe(model.set(step.key, step.value, step.weight));
          } else if (step.op === "get") {
            expect(lru.get(step.key)).toBe(model.get(step.key));
          } else if (step.op === "peek") {
            expect(lru.peek(step.key)).toBe(model.entries.find(([k]) => k === step.key)?.[1]);
          } else {
            expect(lru.delete(step.key)).toBe(model.delete(step.key));
          }
          expect(lru.size).toBe(model.entries.length);
          expect(lru.weight).toBe(model.weight());
        }
        // What is left, least recently used first: evicting everything by overfilling shows the order.
        const order: string[] = [];
        for (const [k] of model.entries) if (lru.has(k)) order.push(k);
        expect(order).toEqual(model.entries.map(([k]) => k));
      }),
      { numRuns: 500 },
    );
  });

  it("tells onRemove of every entry that leaves, whatever the reason, and of nothing else", () => {
    const steps = fc.oneof(operation, fc.record({ op: fc.constant("clear" as const) }), fc.record({ op: fc.constant("sweep" as const), value: fc.integer() }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 30 }), fc.array(steps, { maxLength: 80 }), (maxEntries, maxWeight, ops) => {
        const weights = new Map<string, number>();
        // What the cache holds as far as its removals tell: every entry kept by set, less every one it said left.
        const held = new Map<string, number>();
        const lru = new LruCache<string, number>({
          maxEntries,
          maxWeight,
          weigh: (k) => weights.get(k)!,
          onRemove: (k, v) => {
            expect(held.get(k)).toBe(v);
            held.delete(k);
          },
        });
        for (const step of ops) {
          if (step.op === "set") {
            weights.set(step.key, step.weight);
            if (lru.set(step.key, step.value)) held.set(step.key, step.value);
          } else if (step.op === "get") lru.get(step.key);
          else if (step.op === "peek") lru.peek(step.key);
          else if (step.op === "delete") lru.delete(step.key);
          else if (step.op === "clear") lru.clear();
          else lru.deleteWhere((_k, v) => v <= step.value);
          expect(lru.size).toBe(held.size);
          for (const [k, v] of held) expect(lru.peek(k)).toBe(v);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("forgets the least recently used entry first, a get counting as a use and a peek not", () => {
    const lru = new LruCache<string, number>({ maxEntries: 2 });
    lru.set("a", 1);
    lru.set("b", 2);
    lru.get("a");
    lru.set("c", 3);
    expect([lru.has("a"), lru.has("b"), lru.has("c")]).toEqual([true, false, true]);
    lru.peek("a");
    lru.set("d", 4);
    expect([lru.has("a"), lru.has("c"), lru.has("d")]).toEqual([false, true, true]);
  });

  it("keeps its total weight within maxWeight and refuses an entry heavier than it alone", () => {
    const lru = new LruCache<string, string>({ maxEntries: 100, maxWeight: 10, weigh: (_k, v) => v.length });
    expect(lru.set("x", "12345")).toBe(true);
    expect(lru.set("y", "123456")).toBe(true);
    expect([lru.has("x"), lru.weight]).toEqual([false, 6]);
    expect(lru.set("z", "12345678901")).toBe(false);
    expect([lru.has("z"), lru.has("y"), lru.weight]).toEqual([false, true, 6]);
  });

  it("deletes by a test over keys and values", () => {
    const lru = new LruCache<string, number>({ maxEntries: 10 });
    for (const [k, v] of [["a", 1], ["b", 2], ["c", 1]] as const) lru.set(k, v);
    expect(lru.deleteWhere((_k, v) => v === 1)).toBe(2);
    expect([lru.size, lru.has("b")]).toEqual([1, true]);
  });

  it("keeps working as a full cache evicts many times its size (the list stays consistent)", () => {
    const lru = new LruCache<number, number>({ maxEntries: 1000 });
    for (let i = 0; i < 50_000; i++) {
      lru.set(i, i);
      if (i % 3 === 0) lru.delete(i - 500);
    }
    expect(lru.size).toBeLessThanOrEqual(1000);
    expect(lru.peek(49_999)).toBe(49_999);
    expect(lru.has(48_000)).toBe(false);
  });

  it("refuses a capacity below one entry", () => {
    expect(() => new LruCache({ maxEntries: 0 })).toThrow(RangeError);
  });
});
