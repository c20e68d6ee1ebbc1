/**
 * Regions: each region decides on a Redis of its own, and a GLOBAL rule's
 * limit is shared by all of them. This store sits in front of the region's
 * Redis store and keeps the region in step with the others:
 *
 *   Shipping. Every bucket of a GLOBAL rule that this instance counts a
 *   request in is noted in an outbox per other region. Every REGION_SYNC_MS
 *   the outbox is shipped: each bucket's state as it stands now (read from
 *   this region's Redis, so it carries what every instance of the region
 *   counted), merged into the other region's Redis as a copy (lua/merge.lua:
 *   idempotent, the latest state wins, so a shipment sent twice or late counts
 *   once). Each shipment, or a ping when there is nothing to ship, also marks
 *   this region as heard in the other's Redis for REGION_PARTITION_AFTER_MS.
 *
 *   Deciding. A GLOBAL bucket is decided on its own counts plus the copies of
 *   every other region (lua/decide.lua, countedElsewhere). Copies are at most
 *   one sync interval and a round trip old, so the regions together can admit
 *   more than the limit by what the others admitted in that time: at most
 *   (regions - 1) x one region's admitted rate x (sync interval + round trip).
 *
 *   Partitions. Another region is reachable while this instance's shipments
 *   to it succeed and it has been heard here within REGION_PARTITION_AFTER_MS
 *   (both ways: a link cut one way is a partition too). While any is not, a
 *   GLOBAL bucket is decided, with `degraded` set, by REGION_PARTITION_MODE:
 *     SHARE         on this region's counts alone, under its share of the limit
 *                   (limit / regions): cut off regions that do the same stay
 *                   within the limit together
 *     FAILURE_MODE  by the rule's failureMode: OPEN decides on what this region
 *                   knows (its counts and the last copies), CLOSED refuses (a
 *                   limit of nothing, retry after the rule's window: nothing is
 *                   counted, the other rules report as they stand), LOCAL as SHARE
 *   What was counted meanwhile stays in the outbox and is shipped once the
 *   link is back: the copies then hold each region's whole counts again, so
 *   the regions converge within a sync interval, nothing counted twice and
 *   nothing lost.
 *
 * Only the window counters can be GLOBAL (rule validation): their state is
 * counts per window, which add up across regions.
 */

import type { Redis } from "ioredis";
import type { LimitParams } from "../../domain/algorithms/index.js";
import type { PartitionMode } from "../../domain/regions.js";
import type { LeasedBucket } from "../../domain/lease.js";
import { decideAllOrThrow, type BucketRef, type CallFailure, type Clock, type CounterCall, type CounterReply, type ShardedCounterStore, type Unsubscribe } from "../../domain/ports.js";
import { noTelemetry, type Telemetry } from "../../domain/telemetry.js";
import type { RedisCounterStore } from "../redis/redis-counter-store.js";


/** Another region: its name, its Redis (a client, and the counter store on it that merges copies). */
export interface RegionPeer {
  name: string;
  redis: Pick<Redis, "set">;
  store: Pick<RedisCounterStore, "mergeCopies" | "close">;
}

export interface RegionalCounterStoreOptions {
  /** This region's Redis store. */
  local: RedisCounterStore;
  /** This region's own Redis client, where the other regions mark themselves heard. */
  localRedis: Pick<Redis, "exists">;
  region: string;
  peers: readonly RegionPeer[];
  keyPrefix: string;
  syncMs: number;
  partitionAfterMs: number;
  partitionMode: PartitionMode;
  clock: Clock;
  telemetry?: Telemetry;
  /** Told when a link to another region goes down or comes back (for the log). */
  onLinkChange?: (region: string, up: boolean) => void;
}

/** Buckets one outbox holds at most: beyond, the least recently counted are shipped only when counted again. */
const MAX_OUTBOX = 100_000;
/** Buckets shipped in one round trip. */
const SHIPMENT = 2_000;

interface Noted {
  bucket: BucketRef;
  /** Bumped each time the bucket is counted again, so that a shipment read before it does not clear it. */
  version: number;
}

interface Link {
  peer: RegionPeer;
  outbox: Map<string, Noted>;
  /** When a shipment (or ping) to it last succeeded, by this instance's clock; null: never. */
  lastShippedAtMs: number | null;
  /** Whether it had marked itself heard in this region's Redis at the last look. */
  heard: boolean;
  up: boolean;
}

/** A GLOBAL rule's parameters, as decided while every region is reachable, and while some is not: its share, or nothing. */
interface Views {
  together: LimitParams;
  share: LimitParams;
  nothing: LimitParams;
}

export class RegionalCounterStore implements ShardedCounterStore {
  readonly description: string;
  private readonly links: Link[];
  private readonly views = new WeakMap<LimitParams, Views>();
  private readonly telemetry: Telemetry;
  private timer: ReturnType<typeof setInterval> | null = null;
  private syncing: Promise<void> | null = null;

  constructor(private readonly options: RegionalCounterStoreOptions) {
    this.description = `${options.local.description}, region ${options.region} of ${options.peers.length + 1}`;
    this.telemetry = options.telemetry ?? noTelemetry;
    this.links = options.peers.map((peer) => ({ peer, outbox: new Map(), lastShippedAtMs: null, heard: false, up: false }));
  }

  /** Starts shipping every REGION_SYNC_MS; the first round at once, so that the links are known soon after start. */
  start(): void {
    if (this.timer !== null) return;
    void this.sync();
    this.timer = setInterval(() => void this.sync(), this.options.syncMs);
    this.timer.unref();
  }

  /** Whether every other region is reachable (see the header). */
  get together(): boolean {
    return this.links.every((link) => link.up);
  }

  /** The other regions and whether each is reachable, for /readyz. */
  linkStates(): Record<string, "up" | "down"> {
    return Object.fromEntries(this.links.map((link) => [link.peer.name, link.up ? "up" : "down"]));
  }

  decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    return decideAllOrThrow(this, calls);
  }

  async decideEach(calls: readonly CounterCall[], deadlineMs: number): Promise<{ results: (CounterReply | CallFailure)[]; failedShards: ReadonlySet<string> }> {
    const together = this.together;
    const plans = calls.map((call) => this.plan(call, together));
    const decided = await this.options.local.decideEach(
      plans.map((plan) => plan.call),
      deadlineMs,
    );
    const results = decided.results.map((result, i) => {
      if ("error" in result) return result;
      if (result.allowed && !calls[i]!.dryRun) this.note(calls[i]!);
      return plans[i]!.degraded ? { ...result, degraded: true } : result;
    });
    return { results, failedShards: decided.failedShards };
  }

  shardOf(ruleId: string, key: string): string {
    return this.options.local.shardOf(ruleId, key);
  }

  watchShards(listener: (shards: readonly string[]) => void): Unsubscribe {
    return this.options.local.watchShards(listener);
  }

  reset(ruleId: string, key: string): Promise<boolean> {
    return this.options.local.reset(ruleId, key);
  }

  /** CONCURRENCY rules are REGIONAL (rule validation): their leases are this region's. */
  releaseLease(lease: string, buckets: readonly LeasedBucket[]): Promise<boolean> {
    return this.options.local.releaseLease(lease, buckets);
  }

  /** Ships what is left once more, then closes the other regions' connections and this region's store. */
  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.syncing;
    await this.sync();
    await Promise.all(this.links.map((link) => link.peer.store.close()));
    await this.options.local.close();
  }

  /** One round: every outbox shipped (or a ping), and the other regions' marks read here. Rounds never overlap. */
  sync(): Promise<void> {
    this.syncing ??= Promise.all(this.links.map((link) => this.syncLink(link)))
      .then(() => undefined)
      .finally(() => (this.syncing = null));
    return this.syncing;
  }

  /**
   * The call as this region's Redis gets it: each GLOBAL bucket with the
   * other regions' copies counted while they are reachable, else decided by
   * the partition mode.
   */
  private plan(call: CounterCall, together: boolean): { call: CounterCall; degraded: boolean } {
    if (!call.buckets.some(isGlobal)) return { call, degraded: false };
    const buckets = call.buckets.map((bucket) => (isGlobal(bucket) ? { ...bucket, params: this.paramsOf(bucket, together) } : bucket));
    return { call: { ...call, buckets }, degraded: !together };
  }

  private paramsOf(bucket: BucketRef, together: boolean): LimitParams {
    const views = this.viewsOf(bucket.params);
    if (together) return views.together;
    if (this.options.partitionMode === "SHARE") return views.share;
    switch (bucket.failureMode ?? "OPEN") {
      case "OPEN":
        return views.together;
      case "CLOSED":
        return views.nothing;
      case "LOCAL":
        return views.share;
    }
  }

  private viewsOf(params: LimitParams): Views {
    let views = this.views.get(params);
    if (views === undefined) {
      const regions = this.links.length + 1;
      const share = (n: number) => Math.max(1, Math.floor(n / regions));
      views = {
        together: { ...params, sharedWith: this.links.map((link) => link.peer.name) },
        share: { ...params, limit: share(params.limit), capacity: share(params.capacity) },
        nothing: { ...params, limit: 0, capacity: 0 },
      };
      this.views.set(params, views);
    }
    return views;
  }

  /** Notes the call's GLOBAL buckets for every other region: their state will be shipped at the next round. */
  private note(call: CounterCall): void {
    for (const bucket of call.buckets) {
      if (!isGlobal(bucket)) continue;
      const id = `${bucket.ruleId}\u0000${bucket.key}`;
      for (const { outbox } of this.links) {
        const noted = outbox.get(id);
        if (noted !== undefined) {
          outbox.delete(id);
          noted.version++;
          outbox.set(id, noted);
          continue;
        }
        if (outbox.size >= MAX_OUTBOX) outbox.delete(outbox.keys().next().value!);
        outbox.set(id, { bucket, version: 0 });
      }
    }
  }

  private async syncLink(link: Link): Promise<void> {
    const { localRedis, keyPrefix, region, partitionAfterMs, clock } = this.options;
    const { peer, outbox } = link;
    // The versions as the states are read: a bucket counted again meanwhile bumps its entry's, and stays to be shipped.
    const shipment = [...outbox].slice(0, SHIPMENT).map(([id, { bucket, version }]) => ({ id, bucket, version }));
    try {
      const states = await this.options.local.states(shipment.map(({ bucket }) => bucket));
      const copies = shipment.flatMap(({ bucket }, i) => (states[i] === "" ? [] : [{ bucket, region, state: states[i]! }]));
      await peer.store.mergeCopies(copies);
      await peer.redis.set(heardKey(keyPrefix, region), "1", "PX", partitionAfterMs);
      for (const { id, version } of shipment) {
        if (outbox.get(id)?.version === version) outbox.delete(id);
      }
      link.lastShippedAtMs = clock.now();
      if (copies.length > 0) this.telemetry.regionShipped(peer.name, copies.length);
    } catch {
      // Unreachable, or this region's Redis is: what was counted stays noted, for the next round.
    }
    try {
      link.heard = (await localRedis.exists(heardKey(keyPrefix, peer.name))) === 1;
    } catch {
      link.heard = false;
    }
    const up = link.heard && link.lastShippedAtMs !== null && clock.now() - link.lastShippedAtMs <= partitionAfterMs;
    if (up !== link.up) {
      link.up = up;
      this.telemetry.regionLinkChanged(peer.name, up);
      this.options.onLinkChange?.(peer.name, up);
    }
  }
}

function isGlobal(bucket: BucketRef): boolean {
  return bucket.params.reach === "GLOBAL";
}

/** Where another region marks itself heard in this region's Redis. */
function heardKey(prefix: string, region: string): string {
  return `${prefix}regions:heard:${region}`;
}
