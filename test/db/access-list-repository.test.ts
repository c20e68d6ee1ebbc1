/**
 * PrismaAccessListRepository on PGlite and on Postgres: entries read back
 * exactly, one per identifier (CONFLICT), expired ones read by nobody and
 * replaced by a new addition, each addition and removal in the tenant's
 * history, and the per-tenant cap exact with two instances adding at once.
 */

import { beforeEach, describe, expect, it } from "vitest";
import { openDatabase, type DatabaseTarget } from "../../src/db/database.js";
import { PrismaAccessListRepository } from "../../src/db/prisma-access-list-repository.js";
import type { ListEntrySpec } from "../../src/domain/access-list.js";
import { ConflictError, ValidationError } from "../../src/domain/errors.js";
import { ManualClock } from "../support/clock.js";
import { freshPostgresDatabases, migratedDatabase } from "../support/databases.js";
import { postgresAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 11, 3, 12, 0, 0, 123);
const QUOTA = { maxPerTenant: 100, field: "input.tenantId" };

const spec = (fields: Partial<ListEntrySpec> = {}): ListEntrySpec => ({ tenantId: "acme", list: "DENY", kind: "IP", value: "10.0.0.0/8", note: "scanners", expiresAt: null, ...fields });

function repositoryCases(target: () => Promise<DatabaseTarget>): void {
  const database = migratedDatabase(target, "case");
  let clock: ManualClock;
  let repo: PrismaAccessListRepository;

  beforeEach(() => {
    clock = new ManualClock(T0);
    repo = new PrismaAccessListRepository(database().prisma, () => new Date(clock.now()));
  });

  it("reads back what it added, by id, by tenant and list, and among every entry", async () => {
    const added = await repo.add("e1", spec({ expiresAt: new Date(T0 + 60_000) }), "k1", QUOTA);
    expect(added).toEqual({ id: "e1", ...spec({ expiresAt: new Date(T0 + 60_000) }), createdAt: new Date(T0), createdBy: "k1" });
    await repo.add("e2", spec({ list: "ALLOW", kind: "USER", value: "partner", note: null }), "k1", QUOTA);
    await repo.add("e3", spec({ tenantId: "other" }), "k1", QUOTA);
    expect(await repo.get("e1")).toEqual(added);
    expect((await repo.listOf("acme", "DENY")).map((e) => e.id)).toEqual(["e1"]);
    expect((await repo.listOf("acme", null)).map((e) => e.id).sort()).toEqual(["e1", "e2"]);
    expect((await repo.list()).map((e) => e.id).sort()).toEqual(["e1", "e2", "e3"]);
  });

  it("refuses a second entry of one identifier with a ConflictError, writing nothing", async () => {
    await repo.add("e1", spec(), "k1", QUOTA);
    await expect(repo.add("e2", spec({ note: "again" }), "k1", QUOTA)).rejects.toThrow(ConflictError);
    expect((await repo.list()).map((e) => e.id)).toEqual(["e1"]);
    expect(await repo.history("acme")).toHaveLength(1);
  });

  it("keeps every addition and removal in the tenant's history, with who and when; a removed entry keeps its history", async () => {
    const added = await repo.add("e1", spec(), "k1", QUOTA);
    clock.advance(1_000);
    expect(await repo.remove("e1", "k2")).toEqual(added);
    expect(await repo.remove("e1", "k2")).toBeNull();
    expect(await repo.history("acme")).toEqual([
      { kind: "ADDED", entry: added, at: new Date(T0), actor: "k1" },
      { kind: "REMOVED", entry: added, at: new Date(T0 + 1_000), actor: "k2" },
    ]);
    expect(await repo.history("other")).toEqual([]);
  });

  it("reads an expired entry nowhere, and replaces it by a new addition of the same identifier", async () => {
    const expiring = await repo.add("e1", spec({ expiresAt: new Date(T0 + 1_000) }), "k1", QUOTA);
    clock.advance(1_000);
    expect(await repo.list()).toEqual([]);
    expect(await repo.listOf("acme", "DENY")).toEqual([]);
    const again = await repo.add("e2", spec(), "k2", QUOTA);
    expect((await repo.list()).map((e) => e.id)).toEqual(["e2"]);
    expect((await repo.history("acme")).map((c) => [c.kind, c.entry.id, c.actor])).toEqual([
      ["ADDED", expiring.id, "k1"],
      ["REMOVED", expiring.id, "k2"],
      ["ADDED", again.id, "k2"],
    ]);
  });

  it("refuses an entry past the tenant's cap, naming the quota's field, and counts each tenant apart", async () => {
    const quota = { maxPerTenant: 2, field: "lists[4].tenantId" };
    await repo.add("e1", spec({ value: "10.0.0.0/8" }), "k1", quota);
    await repo.add("e2", spec({ value: "11.0.0.0/8" }), "k1", quota);
    const refused = await repo.add("e3", spec({ value: "12.0.0.0/8" }), "k1", quota).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ValidationError);
    expect(refused).toMatchObject({ field: "lists[4].tenantId", message: 'lists[4].tenantId "acme" already holds 2 access list entries, the most a tenant may have: remove some first' });
    await repo.add("e4", spec({ tenantId: "other" }), "k1", quota);
    expect(await repo.list()).toHaveLength(3);
    // At the cap, an expired entry is still replaced by a new one of its identifier.
    await repo.add("x1", spec({ tenantId: "full", value: "10.0.0.0/8", expiresAt: new Date(T0 + 1) }), "k1", quota);
    await repo.add("x2", spec({ tenantId: "full", value: "11.0.0.0/8" }), "k1", quota);
    clock.advance(1);
    expect(await repo.add("x3", spec({ tenantId: "full", value: "10.0.0.0/8" }), "k1", quota)).toMatchObject({ id: "x3" });
  });
}

describe("PrismaAccessListRepository on in-memory PGlite", () => {
  repositoryCases(async () => ({ kind: "pglite", dataDir: null }));
});

describe.runIf(await postgresAvailable())("PrismaAccessListRepository on Postgres", () => {
  const freshDatabase = freshPostgresDatabases();
  repositoryCases(async () => ({ kind: "postgres", url: await freshDatabase() }));

  it("never passes the cap: of 40 additions racing from two instances past a cap of 25, exactly the room left succeeds", async () => {
    const url = await freshDatabase();
    const instances = [await openDatabase({ kind: "postgres", url }), await openDatabase({ kind: "postgres", url })];
    try {
      await instances[0]!.migrate();
      const [a, b] = instances.map((database) => new PrismaAccessListRepository(database.prisma)) as [PrismaAccessListRepository, PrismaAccessListRepository];
      const quota = { maxPerTenant: 25, field: "input.tenantId" };
      for (let i = 0; i < 5; i++) await a.add(`seed-${i}`, spec({ kind: "USER", value: `seed ${i}` }), "k1", quota);
      const outcomes = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).add(`e${i}`, spec({ kind: "USER", value: `user ${i}` }), "k1", quota)));
      const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
      expect(refused.every((o) => o.reason instanceof ValidationError)).toBe(true);
      expect(outcomes.length - refused.length).toBe(20);
      expect(await b.listOf("acme", null)).toHaveLength(25);
    } finally {
      for (const database of instances) await database.close();
    }
  });
});
