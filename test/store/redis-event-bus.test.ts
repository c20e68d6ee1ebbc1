/** The Redis pub/sub event bus, two "instances" on the machine's Redis under a key prefix of this test's own. */

import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import type { BanEvent, BucketReset, KeyRevocation, NearLimitEvent, RuleChange, ThrottleEvent } from "../../src/domain/events.js";
import { RedisEventBus } from "../../src/store/redis/redis-event-bus.js";
import { REDIS_URL, redisAvailable } from "../support/services.js";

const RULE_CHANGE: RuleChange = {
  kind: "UPDATED",
  ruleId: "r1",
  tenantId: "acme",
  version: 2,
  at: new Date("2026-11-30T12:00:00.123Z"),
  rule: {
    id: "r1",
    tenantId: "acme",
    name: "per-user",
    scope: ["USER"],
    attributeKeys: [],
    when: [],
    resource: "/api/**",
    method: null,
    algorithm: "TOKEN_BUCKET",
    limit: 5,
    window: 1,
    windowUnit: "MINUTES",
    calendar: null,
    burst: 10,
    action: "REJECT",
    failureMode: "OPEN",
    reach: "REGIONAL",
    priority: 0,
    enabled: true,
    autoBan: null,
    version: 2,
    createdAt: new Date("2026-11-30T11:00:00.001Z"),
    updatedAt: new Date("2026-11-30T12:00:00.123Z"),
  },
};

const THROTTLE: ThrottleEvent = {
  at: new Date("2026-11-30T12:00:01.000Z"),
  tenantId: "acme",
  ruleId: "r1",
  ruleName: "per-user",
  key: "user:u1",
  resource: "/api/orders",
  method: "POST",
  action: "REJECT",
  limit: 5,
  retryAfter: 30,
  shadow: false,
  count: 3,
};

const RESET: BucketReset = { ruleId: "r1", tenantId: "acme", key: "user:u1" };
const REVOCATION: KeyRevocation = { keyId: "k1", at: new Date("2026-11-30T12:00:02.000Z") };

const BAN: BanEvent = {
  kind: "BANNED",
  tenantId: "acme",
  ruleId: "r1",
  ban: {
    id: "b1",
    tenantId: "acme",
    dimension: "USER",
    value: "u1",
    until: new Date("2026-11-30T12:10:00.000Z"),
    note: null,
    createdAt: new Date("2026-11-30T12:00:00.000Z"),
    createdBy: "autoBan:r1",
  },
  at: new Date("2026-11-30T12:00:03.000Z"),
};

const { retryAfter: _retryAfter, ...sharedFields } = THROTTLE;
const NEAR_LIMIT: NearLimitEvent = { ...sharedFields, remaining: 0, count: 1 };

/** Pub/sub writes no keys, so a prefix of this test's own needs no cleaning up. */
const prefix = () => `fgtest:${process.pid}:${randomUUID().slice(0, 8)}:`;

interface Instance {
  bus: RedisEventBus;
  changes: RuleChange[];
  resets: BucketReset[];
  revocations: KeyRevocation[];
  throttles: ThrottleEvent[];
  nearLimits: NearLimitEvent[];
  bans: BanEvent[];
  errors: string[];
}

/** Resolves once `done` holds, checking every few milliseconds: pub/sub delivery takes a round trip through Redis. */
async function until(done: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for a message");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe.runIf(await redisAvailable())("RedisEventBus", () => {
  const started: Instance[] = [];

  async function instance(keyPrefix: string, publisher = new Redis(REDIS_URL), instanceId: string = randomUUID()): Promise<Instance> {
    const found: Instance = { bus: undefined!, changes: [], resets: [], revocations: [], throttles: [], nearLimits: [], bans: [], errors: [] };
    found.bus = new RedisEventBus(publisher, new Redis(REDIS_URL), {
      prefix: keyPrefix,
      instanceId,
      onError: (error, what) => found.errors.push(`${what}: ${(error as Error).message}`),
    });
    await found.bus.start();
    found.bus.subscribe("ruleChange", (c) => found.changes.push(c));
    found.bus.subscribe("bucketReset", (r) => found.resets.push(r));
    found.bus.subscribe("keyRevocation", (r) => found.revocations.push(r));
    found.bus.subscribe("throttle", (e) => found.throttles.push(e));
    found.bus.subscribe("nearLimit", (e) => found.nearLimits.push(e));
    found.bus.subscribe("ban", (e) => found.bans.push(e));
    started.push(found);
    return found;
  }

  afterEach(async () => {
    await Promise.all(started.splice(0).map((i) => i.bus.close()));
  });

  it("delivers an instance's own event to its listeners before publishing resolves, and ignores the echo", async () => {
    const shared = prefix();
    const [a, b] = [await instance(shared), await instance(shared)];
    const publishing = a.bus.publish("ruleChange", RULE_CHANGE);
    expect(a.changes).toEqual([RULE_CHANGE]);
    await publishing;
    await until(() => b.changes.length === 1);
    // B's reply is published after A's echo was sent to A, and Redis keeps their order: once A has the reply, any echo would be there too.
    await b.bus.publish("ruleChange", { ...RULE_CHANGE, version: 3 });
    await until(() => a.changes.length === 2);
    expect(a.changes.map((c) => c.version)).toEqual([2, 3]);
  });

  it("carries rule changes, bucket resets, key revocations, throttle and near-limit events to another instance as they were, dates included", async () => {
    const shared = prefix();
    const [a, b] = [await instance(shared), await instance(shared)];
    await a.bus.publish("ruleChange", RULE_CHANGE);
    await a.bus.publish("bucketReset", RESET);
    await a.bus.publish("keyRevocation", REVOCATION);
    a.bus.publish("throttle", THROTTLE);
    a.bus.publish("nearLimit", NEAR_LIMIT);
    await until(() => b.changes.length + b.resets.length + b.revocations.length + b.throttles.length + b.nearLimits.length === 5);
    expect(b.changes).toEqual([RULE_CHANGE]);
    expect(b.resets).toEqual([RESET]);
    expect(b.revocations).toEqual([REVOCATION]);
    expect(a.revocations).toEqual([REVOCATION]);
    expect(b.changes[0]!.rule!.createdAt).toBeInstanceOf(Date);
    expect(b.throttles).toEqual([THROTTLE]);
    expect(b.nearLimits).toEqual([NEAR_LIMIT]);
  });

  describe("wire format, which instances of other versions share", () => {
    const RULE_CHANGE_JSON =
      '{"kind":"UPDATED","ruleId":"r1","tenantId":"acme","version":2,"at":"2026-11-30T12:00:00.123Z","rule":{"id":"r1","tenantId":"acme","name":"per-user",' +
      '"scope":["USER"],"attributeKeys":[],"when":[],"resource":"/api/**","method":null,"algorithm":"TOKEN_BUCKET","limit":5,"window":1,"windowUnit":"MINUTES","calendar":null,"burst":10,' +
      '"action":"REJECT","failureMode":"OPEN","reach":"REGIONAL","priority":0,"enabled":true,"autoBan":null,"version":2,"createdAt":"2026-11-30T11:00:00.001Z","updatedAt":"2026-11-30T12:00:00.123Z"}}';
    const THROTTLE_FIELDS =
      '"at":"2026-11-30T12:00:01.000Z","tenantId":"acme","ruleId":"r1","ruleName":"per-user","key":"user:u1","resource":"/api/orders","method":"POST",' +
      '"action":"REJECT","limit":5';
    /** Each event as its channel carries it, written out by hand: the bytes another instance reads. */
    const WIRE: [channel: string, event: string][] = [
      ["rule-changes", RULE_CHANGE_JSON],
      ["bucket-resets", '{"ruleId":"r1","tenantId":"acme","key":"user:u1"}'],
      ["key-revocations", '{"keyId":"k1","at":"2026-11-30T12:00:02.000Z"}'],
      ["throttle", `{${THROTTLE_FIELDS},"retryAfter":30,"shadow":false,"count":3}`],
      ["near-limit", `{${THROTTLE_FIELDS},"shadow":false,"count":1,"remaining":0}`],
      [
        "bans",
        '{"kind":"BANNED","tenantId":"acme","ruleId":"r1","ban":{"id":"b1","tenantId":"acme","dimension":"USER","value":"u1","until":"2026-11-30T12:10:00.000Z",' +
          '"note":null,"createdAt":"2026-11-30T12:00:00.000Z","createdBy":"autoBan:r1"},"at":"2026-11-30T12:00:03.000Z"}',
      ],
    ];

    it("publishes each topic on its channel as {from, event} JSON, byte for byte", async () => {
      const shared = prefix();
      const raw = new Redis(REDIS_URL);
      const heard: [string, string][] = [];
      raw.on("message", (channel: string, message: string) => heard.push([channel, message]));
      await raw.subscribe(...WIRE.map(([channel]) => `${shared}events:${channel}`));
      const a = await instance(shared, new Redis(REDIS_URL), "instance-a");
      await a.bus.publish("ruleChange", RULE_CHANGE);
      await a.bus.publish("bucketReset", RESET);
      await a.bus.publish("keyRevocation", REVOCATION);
      await a.bus.publish("throttle", THROTTLE);
      await a.bus.publish("nearLimit", NEAR_LIMIT);
      await a.bus.publish("ban", BAN);
      await until(() => heard.length === WIRE.length);
      expect(heard).toEqual(WIRE.map(([channel, event]) => [`${shared}events:${channel}`, `{"from":"instance-a","event":${event}}`]));
      raw.disconnect();
    });

    it("delivers what another instance wrote on each channel to that topic's listeners, dates as Dates", async () => {
      const shared = prefix();
      const a = await instance(shared);
      const raw = new Redis(REDIS_URL);
      for (const [channel, event] of WIRE) await raw.publish(`${shared}events:${channel}`, `{"from":"elsewhere","event":${event}}`);
      await until(() => a.changes.length + a.resets.length + a.revocations.length + a.throttles.length + a.nearLimits.length + a.bans.length === WIRE.length);
      expect(a).toMatchObject({ changes: [RULE_CHANGE], resets: [RESET], revocations: [REVOCATION], throttles: [THROTTLE], nearLimits: [NEAR_LIMIT], bans: [BAN] });
      raw.disconnect();
    });
  });

  it("does not hear instances under another key prefix", async () => {
    const [mine, theirs] = [prefix(), prefix()];
    const a = await instance(mine);
    const raw = new Redis(REDIS_URL);
    await raw.publish(`${theirs}events:throttle`, JSON.stringify({ from: "elsewhere", event: THROTTLE }));
    // Published after the other prefix's message: once A has this one, it would have had that one too.
    await raw.publish(`${mine}events:throttle`, JSON.stringify({ from: "elsewhere", event: { ...THROTTLE, count: 9 } }));
    await until(() => a.throttles.length === 1);
    expect(a.throttles.map((e) => e.count)).toEqual([9]);
    raw.disconnect();
  });

  it("reports a message it cannot read and carries on", async () => {
    const shared = prefix();
    const a = await instance(shared);
    const raw = new Redis(REDIS_URL);
    await raw.publish(`${shared}events:throttle`, "{not json");
    await raw.publish(`${shared}events:throttle`, JSON.stringify({ from: "elsewhere", event: THROTTLE }));
    await until(() => a.throttles.length === 1);
    expect(a.errors).toEqual([expect.stringMatching(new RegExp(`^reading a message on ${shared}events:throttle: `))]);
    raw.disconnect();
  });

  it("reports a rule change or bucket reset it could not publish instead of failing, and still delivers it locally", async () => {
    const broken = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    const a = await instance(prefix(), broken);
    await expect(a.bus.publish("ruleChange", RULE_CHANGE)).resolves.toBeUndefined();
    await expect(a.bus.publish("bucketReset", RESET)).resolves.toBeUndefined();
    expect(a.changes).toEqual([RULE_CHANGE]);
    expect(a.resets).toEqual([RESET]);
    expect(a.errors).toEqual([expect.stringContaining("publishing to"), expect.stringContaining("events:bucket-resets")]);
  });
});
