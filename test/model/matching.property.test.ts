/**
 * Property tests of rules keyed by attributes and applying to some of their
 * values, and of overrides: random rules with random overrides (exact and
 * glob, some expiring along the way) and random checks (attributes present
 * or absent, values that look like a bucket key's labels and separators) go through the
 * Limiter on the in-memory store and on the Redis store, and through the
 * reference models (matching-model.ts for which buckets, reference-model.ts
 * for the arithmetic). Every check must find the same rules, count against
 * the same buckets under the same override, and get the same decision,
 * limit and remaining counts. Time is
 * a ManualClock; nothing sleeps.
 */

import fc from "fast-check";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import type { Override } from "../../src/domain/override.js";
import type { CounterStore } from "../../src/domain/ports.js";
import type { Rule } from "../../src/domain/rule.js";
import { BOOTSTRAP } from "../../src/engine/access/api-key-service.js";
import { Limiter } from "../../src/engine/decision/limiter.js";
import { RuleBook } from "../../src/engine/decision/rule-book.js";
import { MemoryCounterStore } from "../../src/store/memory/memory-counter-store.js";
import { KeyLayout } from "../../src/store/redis/key-layout.js";
import { RedisCounterStore } from "../../src/store/redis/redis-counter-store.js";
import { ManualClock } from "../support/clock.js";
import { makeCheckRequest, makeRule } from "../support/domain-factory.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";
import { anyParams, stepArbitrary } from "./arbitraries.js";
import { modelBucketOf, modelOverrideOf, type ModelCheck, type ModelOverride, type ModelRule } from "./matching-model.js";
import { decideModels, modelFor, type BucketModel } from "./reference-model.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);
const TIMEOUT_MS = 20_000 + RUNS * 80;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const withRedis = await redisAvailable();

/**
 * Values chosen to collide if labels or separators leaked: without escapes,
 * plan "a|attr.region:b" with region "c" and plan "a" with region
 * "b|attr.region:c" would be one bucket.
 */
const VALUE: fc.Arbitrary<string> = fc.constantFrom("free", "a", "c", "a|attr.region:b", "b|attr.region:c", "a%7Cb", "x:y");
const ATTRIBUTE_KEYS = ["plan", "region", "plan.tier"] as const;

const GLOB: fc.Arbitrary<string> = fc.constantFrom("*", "a*", "*c", "a*c", "*|attr*", "free*", "*:*");

/** Overrides of the rule's own targets; an expiry within the steps' reach, or none. */
function overridesOf(targets: string[]): fc.Arbitrary<ModelOverride[]> {
  if (targets.length === 0) return fc.constant([]);
  const override = fc.record({
    target: fc.constantFrom(...targets),
    glob: fc.boolean(),
    exact: fc.oneof(VALUE, fc.constantFrom("u1", "u2", "u|1")),
    pattern: GLOB,
    limit: fc.integer({ min: 1, max: 12 }),
    expiresInMs: fc.option(fc.integer({ min: 1, max: 60_000 }), { freq: 2 }),
  });
  return fc.array(override, { maxLength: 6 }).map((drawn) => {
    // One override per target, match and identifier, as the service keeps them.
    const seen = new Set<string>();
    return drawn.flatMap((o, i) => {
      const identifier = o.glob ? o.pattern : o.exact;
      const identity = `${o.target}\n${o.glob}\n${identifier}`;
      if (seen.has(identity)) return [];
      seen.add(identity);
      return [{ id: `o${i}`, target: o.target, glob: o.glob, identifier, limit: o.limit, expiresAtMs: o.expiresInMs === null ? null : T0 + o.expiresInMs } satisfies ModelOverride];
    });
  });
}

const ruleArbitrary = fc
  .record({
    keyedByUser: fc.boolean(),
    attributeKeys: fc.subarray([...ATTRIBUTE_KEYS]),
    when: fc.subarray([...ATTRIBUTE_KEYS], { maxLength: 2 }).chain((keys) =>
      fc.tuple(...keys.map((key) => fc.uniqueArray(VALUE, { minLength: 1, maxLength: 3 }).map((values) => ({ key, values })))),
    ),
    params: anyParams,
  })
  .chain((rule) => overridesOf([...(rule.keyedByUser ? ["USER"] : []), ...rule.attributeKeys]).map((overrides) => ({ ...rule, overrides })));

const checkArbitrary = fc.record({
  userId: fc.option(fc.constantFrom("u1", "u2", "u|1"), { nil: null, freq: 4 }),
  attributes: fc.record({ plan: fc.option(VALUE), region: fc.option(VALUE), "plan.tier": fc.option(VALUE) }),
});

function overrideOf(rule: ModelRule, o: ModelOverride): Override {
  return {
    id: `${rule.id}-${o.id}`,
    tenantId: "acme",
    ruleId: rule.id,
    dimension: o.target === "USER" ? "USER" : null,
    attributeKey: o.target === "USER" ? null : o.target,
    match: o.glob ? "GLOB" : "EXACT",
    identifier: o.identifier,
    limit: o.limit,
    burst: null,
    window: null,
    windowUnit: null,
    expiresAt: o.expiresAtMs === null ? null : new Date(o.expiresAtMs),
    note: null,
    version: 1,
    actor: null,
    createdAt: new Date(T0),
    updatedAt: new Date(T0),
  };
}

/** The params of the model rule's bucket under an override: its limit, and so its capacity. */
function paramsUnder(params: LimitParams, override: ModelOverride | null): LimitParams {
  return override === null ? params : { ...params, limit: override.limit, capacity: override.limit };
}

/** A stored rule with the model rule's parameters (windows are whole seconds in the arbitraries). */
function ruleOf(model: ModelRule): Rule {
  const { params } = model;
  const hasBurst = params.algorithm === "TOKEN_BUCKET" || params.algorithm === "LEAKY_BUCKET";
  return makeRule({
    id: model.id,
    tenantId: "acme",
    scope: model.keyedByUser ? ["USER"] : [],
    attributeKeys: [...model.attributeKeys].sort(),
    when: model.when,
    algorithm: params.algorithm,
    limit: params.limit,
    window: params.windowMs / 1000,
    windowUnit: "SECONDS",
    burst: hasBurst ? params.capacity : null,
    action: params.action,
  });
}

describe("rules keyed by attributes, and their overrides, agree with the reference models", () => {
  let redis: Redis | null = null;
  let layout: KeyLayout;
  let cleanup: () => Promise<void> = async () => undefined;
  let sequence = 0;

  beforeAll(() => {
    if (!withRedis) return;
    const r = testRedis();
    redis = r.redis;
    cleanup = r.cleanup;
    layout = new KeyLayout(r.prefix, 8);
  });
  afterAll(() => cleanup());

  function stores(clock: ManualClock): CounterStore[] {
    const subjects: CounterStore[] = [new MemoryCounterStore({ clock, sweepIntervalMs: 0 })];
    if (redis) subjects.push(new RedisCounterStore(redis, { layout, clock }));
    return subjects;
  }

  it("same rules, same buckets, same decisions, check by check", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(ruleArbitrary, { minLength: 1, maxLength: 4 }),
        fc.array(fc.tuple(stepArbitrary, checkArbitrary), { minLength: 1, maxLength: 40 }),
        async (generated, steps) => {
          const run = sequence++;
          const rules: ModelRule[] = generated.map((r, i) => ({ ...r, id: `attr-${run}-${i}` }));
          const clock = new ManualClock(T0);
          const book = new RuleBook();
          book.load(rules.map(ruleOf), book.mark(), rules.flatMap((rule) => rule.overrides.map((o) => overrideOf(rule, o))));
          const limiters = stores(clock).map((store) => ({ store, limiter: new Limiter(book, store, null, clock) }));
          const models = new Map<string, BucketModel>();
          /** Engine key -> model bucket, and back: one-to-one, or two buckets collided (or one split). */
          const keyToBucket = new Map<string, string>();
          const bucketToKey = new Map<string, string>();

          for (const [step, generatedCheck] of steps) {
            clock.advance(step.advanceMs);
            const attributes = new Map<string, string>();
            for (const [key, value] of Object.entries(generatedCheck.attributes)) if (value !== null) attributes.set(key, value);
            const check: ModelCheck = { userId: generatedCheck.userId, attributes };
            const applying = rules.flatMap((rule) => {
              const bucket = modelBucketOf(rule, check);
              return bucket === null ? [] : [{ rule, bucket, override: modelOverrideOf(rule, check, clock.now()) }];
            });
            const buckets = applying.map(({ rule, bucket, override }): { model: BucketModel; params: LimitParams } => {
              let model = models.get(bucket);
              if (model === undefined) models.set(bucket, (model = modelFor(rule.params.algorithm)));
              return { model, params: paramsUnder(rule.params, override) };
            });
            const expected = decideModels(buckets, clock.now(), step.cost, step.dryRun);
            const request = makeCheckRequest({ userId: check.userId, attributes, cost: step.cost, dryRun: step.dryRun });

            for (const [n, { store, limiter }] of limiters.entries()) {
              const [decision] = await limiter.check(BOOTSTRAP, [request]);
              const where = `${store.description} at +${clock.now() - T0} ms, ${JSON.stringify(generatedCheck)}`;
              expect(decision!.results.map((r) => r.rule.id).sort(), where).toEqual(applying.map(({ rule }) => rule.id).sort());
              expect(decision!.allowed, where).toBe(applying.length === 0 ? true : expected.allowed);
              for (const result of decision!.results) {
                const i = applying.findIndex(({ rule }) => rule.id === result.rule.id);
                const bucket = applying[i]!.bucket;
                const id = `${result.rule.id}\n${result.key}`;
                if (n === 0) {
                  expect(keyToBucket.get(id) ?? bucket, `${where}: key ${result.key} names two buckets`).toBe(bucket);
                  expect(bucketToKey.get(bucket) ?? id, `${where}: bucket ${bucket} has two keys`).toBe(id);
                  keyToBucket.set(id, bucket);
                  bucketToKey.set(bucket, id);
                }
                const outcome = expected.outcomes[i]!;
                const override = applying[i]!.override;
                expect(
                  { override: result.override?.id ?? null, limit: result.limit, allowed: result.allowed, remaining: result.remaining },
                  where,
                ).toEqual({
                  override: override === null ? null : `${result.rule.id}-${override.id}`,
                  limit: buckets[i]!.params.capacity,
                  allowed: outcome.conforming,
                  remaining: outcome.remaining,
                });
              }
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
  }, TIMEOUT_MS);
});
