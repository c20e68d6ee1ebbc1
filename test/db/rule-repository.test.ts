/**
 * PrismaRuleRepository against a real Postgres and an in-memory PGlite: one
 * set of cases run for both, each case on a freshly migrated database of its
 * own. The repository's clock is pinned, so timestamps are asserted exactly.
 */

import { afterEach, describe, expect, it } from "vitest";
import type { DatabaseTarget } from "../../src/db/database.js";
import { openDatabase, type Database } from "../../src/db/database.js";
import { PrismaRuleRepository } from "../../src/db/prisma-rule-repository.js";
import { ConflictError, RuleQuotaError } from "../../src/domain/errors.js";
import type { OverrideSpec } from "../../src/domain/override.js";
import { DIMENSIONS, type Dimension, type RuleSpec } from "../../src/domain/rule.js";
import { freshPostgresDatabases, repositoryOnManualClock } from "../support/databases.js";
import { makeNonDefaultRuleSpec } from "../support/domain-factory.js";
import { postgresAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0, 123);

/** The spec the cases write: no field at its default, so that each column is seen written and read back. */
const spec = makeNonDefaultRuleSpec;

/** Every field but the tenant different from spec(): an update that writes each column. */
const CHANGED: RuleSpec = {
  tenantId: "acme",
  name: "orders per key",
  scope: ["API_KEY", "ENDPOINT"],
  resource: "/api/v2/**",
  method: "PUT",
  algorithm: "LEAKY_BUCKET",
  limit: 7,
  window: 2,
  windowUnit: "HOURS",
  calendar: { period: "WEEK", timeZone: "America/New_York", weekStartsOn: "SUNDAY" },
  burst: 3,
  action: "THROTTLE",
  failureMode: "CLOSED",
  reach: "GLOBAL",
  attributeKeys: ["customer"],
  when: [{ key: "plan", values: ["pro"] }],
  priority: -1,
  enabled: true,
  autoBan: null,
};

function ruleRepositoryCases(target: () => Promise<DatabaseTarget>): void {
  const subject = repositoryOnManualClock(target, T0, "case");

  describe("create", () => {
    it("returns the exact spec at version 1 with createdAt equal to updatedAt", async () => {
      const rule = await subject.repo.create("r1", spec());
      expect(rule).toEqual({ id: "r1", ...spec(), version: 1, createdAt: new Date(T0), updatedAt: new Date(T0) });
    });

    it("throws a ConflictError naming input.name when the tenant already has a rule of that name", async () => {
      await subject.repo.create("r1", spec());
      const error = await subject.repo.create("r2", spec({ limit: 1 })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect((error as ConflictError).message).toBe('input.name: tenant "acme" already has a rule named "per-user"');
    });

    it("writes nothing when the name is taken", async () => {
      const first = await subject.repo.create("r1", spec());
      await subject.repo.create("r2", spec({ limit: 1 })).catch(() => undefined);
      expect(await subject.repo.list()).toEqual([first]);
    });

    it("accepts a name another tenant already uses", async () => {
      await subject.repo.create("r1", spec({ tenantId: "acme" }));
      const other = await subject.repo.create("r2", spec({ tenantId: "globex" }));
      expect(other).toMatchObject({ id: "r2", tenantId: "globex", name: "per-user", version: 1 });
    });
  });

  describe("get and list", () => {
    it("get returns the rule as create returned it", async () => {
      const created = await subject.repo.create("r1", spec());
      expect(await subject.repo.get("r1")).toEqual(created);
    });

    it("get returns null for an unknown id", async () => {
      expect(await subject.repo.get("missing")).toBeNull();
    });

    it("list returns [] when there are no rules", async () => {
      expect(await subject.repo.list()).toEqual([]);
    });

    it("list returns every rule, ordered by tenant then name", async () => {
      await subject.repo.create("r1", spec({ tenantId: "globex", name: "b" }));
      await subject.repo.create("r2", spec({ tenantId: "acme", name: "z" }));
      await subject.repo.create("r3", spec({ tenantId: "globex", name: "a" }));
      await subject.repo.create("r4", spec({ tenantId: "*", name: "m" }));
      expect((await subject.repo.list()).map((r) => [r.id, r.tenantId, r.name])).toEqual([
        ["r4", "*", "m"],
        ["r2", "acme", "z"],
        ["r3", "globex", "a"],
        ["r1", "globex", "b"],
      ]);
    });
  });

  describe("update", () => {
    it("with the current version writes the spec, bumps the version and sets a new updatedAt", async () => {
      await subject.repo.create("r1", spec());
      subject.clock.advance(60_000);
      const updated = await subject.repo.update("r1", CHANGED, 1);
      expect(updated).toEqual({ id: "r1", ...CHANGED, version: 2, createdAt: new Date(T0), updatedAt: new Date(T0 + 60_000) });
    });

    it("persists what it returns", async () => {
      await subject.repo.create("r1", spec());
      subject.clock.advance(60_000);
      const updated = await subject.repo.update("r1", CHANGED, 1);
      expect(await subject.repo.get("r1")).toEqual(updated);
    });

    it("with a stale version returns null and changes nothing", async () => {
      await subject.repo.create("r1", spec());
      const current = await subject.repo.update("r1", spec({ limit: 200 }), 1);
      subject.clock.advance(60_000);
      expect(await subject.repo.update("r1", CHANGED, 1)).toBeNull();
      expect(await subject.repo.get("r1")).toEqual(current);
    });

    it("of a missing id returns null and creates nothing", async () => {
      expect(await subject.repo.update("missing", spec(), 1)).toBeNull();
      expect(await subject.repo.list()).toEqual([]);
    });

    it("may keep the rule's own name", async () => {
      await subject.repo.create("r1", spec());
      expect(await subject.repo.update("r1", spec({ limit: 1 }), 1)).toMatchObject({ name: "per-user", limit: 1, version: 2 });
    });

    it("to a name another rule of the tenant has throws a ConflictError naming input.name and changes nothing", async () => {
      await subject.repo.create("r1", spec({ name: "taken" }));
      const mine = await subject.repo.create("r2", spec({ name: "mine" }));
      const error = await subject.repo.update("r2", spec({ name: "taken" }), 1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect((error as ConflictError).message).toBe('input.name: tenant "acme" already has a rule named "taken"');
      expect(await subject.repo.get("r2")).toEqual(mine);
    });

    it("lets exactly one of 10 concurrent writers of the same version win; the others get null", async () => {
      await subject.repo.create("r1", spec());
      const writers = Array.from({ length: 10 }, (_, i) => subject.repo.update("r1", spec({ limit: 1_000 + i }), 1));
      const results = await Promise.all(writers);
      const winners = results.filter((r) => r !== null);
      expect(winners).toHaveLength(1);
      expect(winners[0]!.version).toBe(2);
      expect(await subject.repo.get("r1")).toEqual(winners[0]);
    });
  });

  describe("overrides", () => {
    const override = (fields: Partial<OverrideSpec> = {}): OverrideSpec => ({
      ruleId: "r1",
      dimension: "USER",
      attributeKey: null,
      match: "EXACT",
      identifier: "alice",
      limit: 50,
      burst: 60,
      window: 2,
      windowUnit: "MINUTES",
      expiresAt: new Date(T0 + 60_000),
      note: "why",
      ...fields,
    });

    it("writes every field, takes the rule to its next version, and reads back what it wrote", async () => {
      await subject.repo.create("r1", spec());
      const written = await subject.repo.setOverride("o1", override(), { actor: "key-1", note: null });
      expect(written).toEqual({
        rule: { id: "r1", ...spec(), version: 2, createdAt: new Date(T0), updatedAt: new Date(T0) },
        override: { id: "o1", tenantId: "acme", ...override(), version: 2, actor: "key-1", createdAt: new Date(T0), updatedAt: new Date(T0) },
      });
      expect(await subject.repo.getOverride("o1")).toEqual(written!.override);
      expect(await subject.repo.listOverrides()).toEqual([written!.override]);
    });

    it("replaces the override of the same target, match and identifier, keeping its id", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.setOverride("o1", override());
      subject.clock.advance(1000);
      const again = await subject.repo.setOverride("o2", override({ limit: 7, attributeKey: null }));
      expect(again!.override).toMatchObject({ id: "o1", limit: 7, version: 3, createdAt: new Date(T0), updatedAt: new Date(T0 + 1000) });
      expect(await subject.repo.pageOverrides("r1", 10, null)).toHaveLength(1);
    });

    it("lists only overrides not yet expired, and pages a rule's by id", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.setOverride("o1", override({ identifier: "a", expiresAt: new Date(T0 + 1000) }));
      await subject.repo.setOverride("o2", override({ identifier: "b", expiresAt: null }));
      subject.clock.advance(1000);
      expect((await subject.repo.listOverrides()).map((o) => o.id)).toEqual(["o2"]);
      expect((await subject.repo.pageOverrides("r1", 1, null)).map((o) => o.id)).toEqual(["o1"]);
      expect((await subject.repo.pageOverrides("r1", 1, "o1")).map((o) => o.id)).toEqual(["o2"]);
    });

    it("deletes one, taking the rule to its next version, and goes with its rule when the rule is deleted", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.setOverride("o1", override({ identifier: "a" }));
      await subject.repo.setOverride("o2", override({ identifier: "b" }));
      expect(await subject.repo.deleteOverride("o1")).toMatchObject({ rule: { version: 4 }, override: { id: "o1", version: 4 } });
      expect(await subject.repo.deleteOverride("o1")).toBeNull();
      await subject.repo.delete("r1");
      expect(await subject.repo.getOverride("o2")).toBeNull();
      expect(await subject.repo.setOverride("o3", override())).toBeNull();
    });
  });

  describe("changeMark", () => {
    it("moves with every write, on a clock that stands still, and with nothing else, even back to a state it had", async () => {
      const marks: string[] = [await subject.repo.changeMark()];
      const expectMoved = async () => {
        const mark = await subject.repo.changeMark();
        expect(marks).not.toContain(mark);
        marks.push(mark);
      };
      await subject.repo.create("r1", spec());
      await expectMoved();
      await subject.repo.list();
      await subject.repo.listOverrides();
      expect(await subject.repo.changeMark()).toBe(marks.at(-1));
      await subject.repo.update("r1", spec({ limit: 9 }), 1);
      await expectMoved();
      const override: OverrideSpec = { ruleId: "r1", dimension: "USER", attributeKey: null, match: "EXACT", identifier: "alice", limit: 50, burst: null, window: 1, windowUnit: "MINUTES", expiresAt: null, note: null };
      await subject.repo.setOverride("o1", override);
      await expectMoved();
      await subject.repo.setOverride("o2", { ...override, limit: 60 });
      await expectMoved();
      await subject.repo.deleteOverride("o1");
      await expectMoved();
      await subject.repo.delete("r1");
      await expectMoved();
      // The same count of rules, at the same version, written at the same instant: the revisions still tell.
      await subject.repo.create("r2", spec());
      const before = await subject.repo.changeMark();
      await subject.repo.delete("r2");
      await subject.repo.create("r3", spec());
      expect(await subject.repo.changeMark()).not.toBe(before);
      await subject.repo.writeAll([{ kind: "update", id: "r3", spec: spec({ limit: 3 }), version: 1 }]);
      await expectMoved();
    });
  });

  describe("delete", () => {
    it("returns the rule as it was", async () => {
      const created = await subject.repo.create("r1", spec());
      expect(await subject.repo.delete("r1")).toEqual(created);
    });

    it("removes the rule: get returns null afterwards", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.delete("r1");
      expect(await subject.repo.get("r1")).toBeNull();
    });

    it("of a missing id returns null", async () => {
      expect(await subject.repo.delete("missing")).toBeNull();
    });

    it("frees the name for a new rule of the tenant", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.delete("r1");
      expect(await subject.repo.create("r2", spec())).toMatchObject({ id: "r2", name: "per-user", version: 1 });
    });
  });

  describe("round trips", () => {
    const scopes: Dimension[][] = [[], ["TENANT"], ["USER", "IP"], [...DIMENSIONS], ["ENDPOINT", "API_KEY", "CLIENT"]];
    it.each(scopes.map((scope) => [JSON.stringify(scope), scope] as const))("scope %s comes back as written, in order", async (_, scope) => {
      await subject.repo.create("r1", spec({ scope }));
      expect((await subject.repo.get("r1"))?.scope).toEqual(scope);
    });

    it("resource, method and burst come back as null when written as null", async () => {
      await subject.repo.create("r1", spec({ resource: null, method: null, burst: null }));
      expect(await subject.repo.get("r1")).toMatchObject({ resource: null, method: null, burst: null });
    });

    it("an update can set nullable fields to null", async () => {
      await subject.repo.create("r1", spec());
      await subject.repo.update("r1", spec({ resource: null, method: null, burst: null }), 1);
      expect(await subject.repo.get("r1")).toMatchObject({ resource: null, method: null, burst: null });
    });
  });

  describe("the rule quota", () => {
    const named = (tenantId: string, name: string) => spec({ tenantId, name });

    it("create refuses the rule that would take a tenant past it, with RuleQuotaError, and writes nothing", async () => {
      await subject.repo.create("r1", named("acme", "a"), undefined, 2);
      await subject.repo.create("r2", named("acme", "b"), undefined, 2);
      const error = await subject.repo.create("r3", named("acme", "c"), undefined, 2).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RuleQuotaError);
      expect(error).toMatchObject({ tenantId: "acme", wouldHave: 3, max: 2 });
      expect(await subject.repo.get("r3")).toBeNull();
      expect(await subject.repo.history("r3")).toEqual([]);
      expect((await subject.repo.create("r4", named("globex", "c"), undefined, 2)).id).toBe("r4");
    });

    it('counts tenant "*" apart, as a tenant of its own', async () => {
      await subject.repo.create("r1", named("*", "a"), undefined, 1);
      await expect(subject.repo.create("r2", named("*", "b"), undefined, 1)).rejects.toBeInstanceOf(RuleQuotaError);
      expect((await subject.repo.create("r3", named("acme", "a"), undefined, 1)).id).toBe("r3");
    });

    it("writeAll counts what each tenant would have after all its writes, updates counting nothing, and writes none past it", async () => {
      await subject.repo.create("r1", named("acme", "a"), undefined, 3);
      const writes = [
        { kind: "update" as const, id: "r1", spec: named("acme", "a2"), version: 1 },
        { kind: "create" as const, id: "r2", spec: named("acme", "b") },
        { kind: "create" as const, id: "r3", spec: named("acme", "c") },
        { kind: "create" as const, id: "r4", spec: named("globex", "a") },
      ];
      expect(await subject.repo.writeAll(writes, undefined, 3)).toHaveLength(4);
      const more = [
        { kind: "create" as const, id: "r5", spec: named("globex", "b") },
        { kind: "create" as const, id: "r6", spec: named("acme", "d") },
      ];
      const error = await subject.repo.writeAll(more, undefined, 3).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: "RuleQuotaError", tenantId: "acme", wouldHave: 4, max: 3 });
      expect(await subject.repo.get("r5")).toBeNull();
      expect((await subject.repo.list()).map((r) => r.id).sort()).toEqual(["r1", "r2", "r3", "r4"]);
    });
  });
}

describe.runIf(await postgresAvailable())("PrismaRuleRepository on Postgres", () => {
  const freshDatabase = freshPostgresDatabases();
  ruleRepositoryCases(async () => ({ kind: "postgres", url: await freshDatabase() }));
});

/**
 * Two instances, each with its own connections, creating rules in one tenant
 * at once: without the tenant's lock every creator would count the same rules
 * and insert, and the tenant would end far past its quota.
 */
describe.runIf(await postgresAvailable())("the rule quota with concurrent creators on Postgres", () => {
  const freshDatabase = freshPostgresDatabases();
  let instances: Database[] = [];

  afterEach(async () => {
    for (const database of instances.splice(0)) await database.close();
  });

  it("is never exceeded: of 40 creations racing from two instances past a quota of 25, exactly the room left succeeds", async () => {
    const url = await freshDatabase();
    instances = [await openDatabase({ kind: "postgres", url }), await openDatabase({ kind: "postgres", url })];
    await instances[0]!.migrate();
    const [a, b] = instances.map((database) => new PrismaRuleRepository(database.prisma)) as [PrismaRuleRepository, PrismaRuleRepository];
    for (let i = 0; i < 5; i++) await a.create(`seed-${i}`, spec({ tenantId: "acme", name: `seed ${i}` }));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).create(`r${i}`, spec({ tenantId: "acme", name: `rule ${i}` }), undefined, 25)),
    );
    const refused = outcomes.filter((o) => o.status === "rejected");
    expect(refused.every((o) => (o as PromiseRejectedResult).reason instanceof RuleQuotaError)).toBe(true);
    expect(outcomes.length - refused.length).toBe(20);
    expect((await b.list()).filter((rule) => rule.tenantId === "acme")).toHaveLength(25);
  });
});

describe("PrismaRuleRepository on in-memory PGlite", () => {
  ruleRepositoryCases(async () => ({ kind: "pglite", dataDir: null }));
});
