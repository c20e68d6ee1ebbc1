/**
 * Limiter.releaseLease takes a lease id as the caller's text: only the
 * buckets of CONCURRENCY rules it knows, of the lease's tenant or "*", one
 * per rule, reach the store, so a made-up id costs no more than a real one.
 */

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { encodeLease } from "../../../src/domain/lease.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { Limiter } from "../../../src/engine/decision/limiter.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest, makeRule } from "../../support/domain-factory.js";
import { CountingCounterStore } from "../../support/ports.js";

describe("Limiter.releaseLease", () => {
  it("sends the store only the buckets of the lease tenant's CONCURRENCY rules, each rule once", async () => {
    const clock = new ManualClock();
    const store = new CountingCounterStore(new MemoryCounterStore({ clock, sweepIntervalMs: 0 }));
    const book = new RuleBook();
    const inFlight = makeRule({ scope: ["USER"], algorithm: "CONCURRENCY", limit: 1 });
    const rate = makeRule({ scope: ["USER"], limit: 10 });
    const elsewhere = makeRule({ tenantId: "another-tenant", scope: ["USER"], algorithm: "CONCURRENCY", limit: 1 });
    book.load([inFlight, rate, elsewhere]);
    const limiter = new Limiter(book, store, null, clock);
    const [admitted] = await limiter.check(BOOTSTRAP, [makeCheckRequest({ userId: "u1", resource: null, method: null })]);
    const holder = (JSON.parse(Buffer.from(admitted!.lease!.id, "base64url").toString("utf8")) as [string, string])[1];

    const named = [
      ...Array.from({ length: 100 }, (_, i) => ({ ruleId: randomUUID(), key: `user:u${i}` })),
      { ruleId: rate.id, key: "user:u1" },
      { ruleId: elsewhere.id, key: "user:u1" },
      ...Array.from({ length: 20 }, () => ({ ruleId: inFlight.id, key: "user:u1" })),
    ];
    expect(await limiter.releaseLease(BOOTSTRAP, encodeLease({ tenantId: inFlight.tenantId, holder, buckets: named }))).toBe(true);
    expect(store.releasedBuckets).toEqual([[{ ruleId: inFlight.id, key: "user:u1" }]]);

    // Naming none of them, the store is not asked at all.
    expect(await limiter.releaseLease(BOOTSTRAP, encodeLease({ tenantId: inFlight.tenantId, holder, buckets: named.slice(0, 102) }))).toBe(false);
    expect(store.releasedBuckets).toHaveLength(1);
  });
});
