/**
 * A bounded memo for values that are costly to compute and never go stale
 * (a digest of a key, say), looked up so often that an LRU's bookkeeping on
 * every hit shows: LruCache moves a hit to the front of its list, writing
 * to the entry and to its neighbours, which on a busy path are rarely in
 * the processor's cache. Here a hit in the young generation writes nothing.
 *
 * Entries go into the young generation. When it is full (half the entries
 * or half the weight allowed), it becomes the old one and the old one is
 * dropped whole. A hit in the old generation moves the entry to the young
 * one, so what is still used survives a turnover and what is not goes with
 * the next; a miss in both computes the value again. At most maxEntries
 * entries and maxWeight in all, every operation O(1).
 */

export interface GenerationalCacheOptions<K, V> {
  /** Most entries kept in both generations; at least 2. */
  maxEntries: number;
  /** Most total weight kept in both generations; an entry heavier than half of it is not kept. */
  maxWeight: number;
  /** An entry's weight, from its key and value alone: the cache weighs an entry again when it lets it go. */
  weigh: (key: K, value: V) => number;
}

export class GenerationalCache<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();
  private youngWeight = 0;
  private oldWeight = 0;
  private readonly entriesPerGeneration: number;
  private readonly weightPerGeneration: number;

  constructor(private readonly options: GenerationalCacheOptions<K, V>) {
    if (!(options.maxEntries >= 2)) throw new RangeError("a generational cache keeps at least two entries, one a generation");
    this.entriesPerGeneration = Math.floor(options.maxEntries / 2);
    this.weightPerGeneration = options.maxWeight / 2;
  }

  get(key: K): V | undefined {
    const young = this.young.get(key);
    if (young !== undefined) return young;
    const old = this.old.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  /** Whether it holds the key, without counting as a use. */
  has(key: K): boolean {
    return this.young.has(key) || this.old.has(key);
  }

  /** Keeps the value in the young generation, turning the generations over first when it has no room. Returns whether it was kept. */
  set(key: K, value: V): boolean {
    const weight = this.options.weigh(key, value);
    if (weight > this.weightPerGeneration) {
      this.delete(key);
      return false;
    }
    if (this.young.size >= this.entriesPerGeneration || this.youngWeight + weight > this.weightPerGeneration) {
      this.old = this.young;
      this.oldWeight = this.youngWeight;
      this.young = new Map();
      this.youngWeight = 0;
    }
    this.delete(key);
    this.young.set(key, value);
    this.youngWeight += weight;
    return true;
  }

  private delete(key: K): void {
    const young = this.young.get(key);
    if (young !== undefined) {
      this.young.delete(key);
      this.youngWeight -= this.options.weigh(key, young);
    }
    const old = this.old.get(key);
    if (old !== undefined) {
      this.old.delete(key);
      this.oldWeight -= this.options.weigh(key, old);
    }
  }

  /** Entries kept, in both generations. */
  get size(): number {
    return this.young.size + this.old.size;
  }

  /** The sum of the entries' weights. */
  get weight(): number {
    return this.youngWeight + this.oldWeight;
  }
}
