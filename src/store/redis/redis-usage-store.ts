/**
 * Usage counts in Redis, the sum of every instance's batches. Each batch is
 * one pipeline of HINCRBY and ZINCRBY (on a Redis Cluster, its commands go to
 * their nodes together: ioredis pipelines them per node), and every key
 * expires USAGE_RETENTION_MS after its minute's last batch, so nothing needs
 * cleaning up. Keys carry a hash tag per rule or tenant, so that one read
 * (all minutes of a rule, or of a tenant) stays in one Cluster slot:
 *
 *   fg:usage:{r:<rule id>}:<minute>   hash: a:<tenant> r:<tenant> s:<tenant>
 *                                     (allowed, refused, shadow-refused by the requests of that tenant)
 *   fg:usage:{t:<tenant>}:<minute>    sorted set: ["<rule id>","<key>"] by refusals
 *   fg:usage:{all}:<minute>           sorted set: ["<tenant>","<rule id>","<key>"] by refusals
 *   fg:usage:instances                sorted set: instance id by its last batch's time
 *
 * A sorted set keeps only its MAX_STORED_BUCKETS most refused members.
 */

import type { Cluster, Redis } from "ioredis";
import type { UsageStore } from "../../domain/ports.js";
import { MAX_STORED_BUCKETS, MINUTE_MS, noUsage, topOf, USAGE_RETENTION_MS, type BucketUsage, type UsageBatch, type UsageCounts } from "../../domain/usage.js";

type Command = [name: string, ...args: (string | number)[]];

/** The hash fields of each count, before the tenant. */
const FIELDS: Record<keyof UsageCounts, string> = { allowed: "a:", refused: "r:", shadowRefused: "s:" };

export class RedisUsageStore implements UsageStore {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  async add(batch: UsageBatch): Promise<void> {
    const commands: Command[] = [];
    const expiring = new Map<string, number>();
    const expireAt = (key: string, minuteMs: number) => expiring.set(key, Math.max(expiring.get(key) ?? 0, minuteMs + MINUTE_MS + USAGE_RETENTION_MS));
    for (const { ruleId, tenantId, minuteMs, counts } of batch.rules) {
      const key = this.ruleKey(ruleId, minuteMs);
      for (const outcome of Object.keys(FIELDS) as (keyof UsageCounts)[]) {
        if (counts[outcome] > 0) commands.push(["hincrby", key, FIELDS[outcome] + tenantId, counts[outcome]]);
      }
      expireAt(key, minuteMs);
    }
    const sortedSets = new Set<string>();
    for (const { tenantId, ruleId, key, minuteMs, refusals } of batch.buckets) {
      const tenantKey = this.tenantKey(tenantId, minuteMs);
      const allKey = this.allTenantsKey(minuteMs);
      commands.push(["zincrby", tenantKey, refusals, JSON.stringify([ruleId, key])], ["zincrby", allKey, refusals, JSON.stringify([tenantId, ruleId, key])]);
      for (const sortedSet of [tenantKey, allKey]) {
        sortedSets.add(sortedSet);
        expireAt(sortedSet, minuteMs);
      }
    }
    for (const sortedSet of sortedSets) commands.push(["zremrangebyrank", sortedSet, 0, -(MAX_STORED_BUCKETS + 1)]);
    for (const [key, atMs] of expiring) commands.push(["pexpireat", key, atMs]);
    const instances = this.instancesKey();
    commands.push(
      ["zadd", instances, batch.atMs, batch.instanceId],
      ["zremrangebyscore", instances, "-inf", `(${batch.atMs - USAGE_RETENTION_MS}`],
      ["pexpire", instances, USAGE_RETENTION_MS],
    );
    await this.send(commands);
  }

  async ruleUsage(ruleId: string, tenantId: string | null, minutes: readonly number[]): Promise<UsageCounts[]> {
    if (tenantId === null) {
      const replies = await this.send(minutes.map((minuteMs): Command => ["hgetall", this.ruleKey(ruleId, minuteMs)]));
      return replies.map((reply) => {
        const sum = noUsage();
        for (const [field, value] of fieldsOf(reply)) {
          const outcome = outcomeOf(field);
          if (outcome !== null) sum[outcome] += Number(value);
        }
        return sum;
      });
    }
    const fields = Object.values(FIELDS).map((field) => field + tenantId);
    const replies = (await this.send(minutes.map((minuteMs): Command => ["hmget", this.ruleKey(ruleId, minuteMs), ...fields]))) as (string | null)[][];
    return replies.map(([allowed, refused, shadowRefused]) => ({ allowed: Number(allowed ?? 0), refused: Number(refused ?? 0), shadowRefused: Number(shadowRefused ?? 0) }));
  }

  async topBuckets(tenantId: string | null, minutes: readonly number[], limit: number): Promise<BucketUsage[]> {
    if (minutes.length === 0) return [];
    const keys = minutes.map((minuteMs) => (tenantId === null ? this.allTenantsKey(minuteMs) : this.tenantKey(tenantId, minuteMs)));
    // ZUNION sums each member's refusals over the minutes; its reply is in ascending order, so the most refused come last.
    const [reply] = (await this.send([["zunion", keys.length, ...keys, "WITHSCORES"]])) as string[][];
    const buckets: BucketUsage[] = [];
    for (let i = reply!.length - 2; i >= 0 && buckets.length < limit; i -= 2) {
      const member = JSON.parse(reply![i]!) as string[];
      const [bucketTenant, ruleId, key] = tenantId === null ? member : [tenantId, ...member];
      buckets.push({ tenantId: bucketTenant!, ruleId: ruleId!, key: key!, refusals: Number(reply![i + 1]) });
    }
    return topOf(buckets, limit);
  }

  async instancesSince(sinceMs: number): Promise<number> {
    const [count] = (await this.send([["zcount", this.instancesKey(), sinceMs, "+inf"]])) as number[];
    return count!;
  }

  private ruleKey(ruleId: string, minuteMs: number): string {
    return `${this.prefix}usage:{r:${ruleId}}:${minuteMs}`;
  }

  private tenantKey(tenantId: string, minuteMs: number): string {
    return `${this.prefix}usage:{t:${tenantId}}:${minuteMs}`;
  }

  private allTenantsKey(minuteMs: number): string {
    return `${this.prefix}usage:{all}:${minuteMs}`;
  }

  private instancesKey(): string {
    return `${this.prefix}usage:instances`;
  }

  /**
   * One pipeline on one Redis; on a Cluster each command on its own (a
   * Cluster pipeline must stay on one node). Throws the first command's error.
   */
  private async send(commands: readonly Command[]): Promise<unknown[]> {
    if (commands.length === 0) return [];
    if (this.redis.isCluster) return Promise.all(commands.map(([name, ...args]) => this.redis.call(name, ...args)));
    const replies = (await this.redis.pipeline(commands as unknown as string[][]).exec()) ?? [];
    return replies.map(([error, reply]) => {
      if (error) throw error;
      return reply;
    });
  }
}

/** HGETALL's reply: an object through a pipeline (ioredis converts it), a flat list through `call`. */
function fieldsOf(reply: unknown): [string, string][] {
  if (!Array.isArray(reply)) return Object.entries(reply as Record<string, string>);
  const fields: [string, string][] = [];
  for (let i = 0; i + 1 < reply.length; i += 2) fields.push([reply[i] as string, reply[i + 1] as string]);
  return fields;
}

function outcomeOf(field: string): keyof UsageCounts | null {
  for (const outcome of Object.keys(FIELDS) as (keyof UsageCounts)[]) if (field.startsWith(FIELDS[outcome])) return outcome;
  return null;
}
