/** Random rules and steps for the property tests: the model's, and the Redis Cluster store's. */

import fc from "fast-check";
import type { LimitParams } from "../../src/domain/algorithms/index.js";
import { ACTIONS, ALGORITHMS, type Algorithm } from "../../src/domain/rule.js";

export function paramsFor(algorithm: Algorithm) {
  return fc
    .record({
      limit: fc.integer({ min: 1, max: 12 }),
      windowMs: fc.constantFrom(1_000, 2_000, 7_000, 60_000),
      extraCapacity: fc.integer({ min: -3, max: 8 }),
      action: fc.constantFrom(...ACTIONS),
    })
    .map(({ limit, windowMs, extraCapacity, action }): LimitParams => {
      const hasBurst = algorithm === "TOKEN_BUCKET" || algorithm === "LEAKY_BUCKET";
      // Rule validation refuses THROTTLE for CONCURRENCY.
      const allowed = algorithm === "CONCURRENCY" && action === "THROTTLE" ? "REJECT" : action;
      return { algorithm, limit, windowMs, capacity: hasBurst ? Math.max(1, limit + extraCapacity) : limit, action: allowed };
    });
}

export const stepArbitrary = fc.record({
  advanceMs: fc.oneof(
    { weight: 5, arbitrary: fc.integer({ min: 0, max: 400 }) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 5_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
  ),
  cost: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 15 }) }),
  dryRun: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  changeRule: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});

/** A rule of any algorithm. */
export const anyParams = fc.constantFrom(...ALGORITHMS).chain((algorithm) => paramsFor(algorithm));
