/**
 * The revisions PrismaRuleRepository writes with every change, in the same
 * transaction, on Postgres and in-memory PGlite; writeAll's all-or-nothing;
 * and the migration that starts the history of rules that already exist.
 * One database per storage: each case uses rule ids and tenants of its own.
 */

import { randomUUID } from "node:crypto";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { describe, expect, it } from "vitest";
import type { DatabaseTarget } from "../../src/db/database.js";
import { PrismaClient } from "../../src/db/generated/client.js";
import { migrate, readMigrations } from "../../src/db/migrations.js";
import { PrismaRuleRepository } from "../../src/db/prisma-rule-repository.js";
import { pgliteSqlClient, pgSqlClient, type SqlClient } from "../../src/db/sql-client.js";
import { ConflictError } from "../../src/domain/errors.js";
import type { RuleSpec } from "../../src/domain/rule.js";
import { freshPostgresDatabases, repositoryOnManualClock } from "../support/databases.js";
import { makeNonDefaultRuleSpec } from "../support/domain-factory.js";
import { postgresAvailable } from "../support/services.js";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0, 123);
const ORIGIN = { actor: "key:ops", note: "because" };

/** A spec of a tenant of its own: the cases share a database, and a tenant's rule names are unique. */
function spec(overrides: Partial<RuleSpec> = {}): RuleSpec {
  return makeNonDefaultRuleSpec({ tenantId: `t-${randomUUID()}`, ...overrides });
}

function historyCases(target: () => Promise<DatabaseTarget>): void {
  const subject = repositoryOnManualClock(target, T0, "describe");

  it("records a creation: version 1, its time, who and why, and the whole rule after", async () => {
    const rule = await subject.repo.create(randomUUID(), spec(), ORIGIN);
    expect(await subject.repo.history(rule.id)).toEqual([
      { ruleId: rule.id, tenantId: rule.tenantId, version: 1, kind: "CREATED", at: new Date(T0), ...ORIGIN, before: null, after: rule, override: null },
    ]);
  });

  it("records an update with the rule before and after, and nothing for one that finds another version", async () => {
    const created = await subject.repo.create(randomUUID(), spec());
    subject.clock.advance(1000);
    const updated = (await subject.repo.update(created.id, spec({ tenantId: created.tenantId, limit: 7 }), 1))!;
    expect(await subject.repo.update(created.id, spec({ tenantId: created.tenantId, limit: 9 }), 1)).toBeNull();
    expect((await subject.repo.history(created.id)).slice(1)).toEqual([
      { ruleId: created.id, tenantId: created.tenantId, version: 2, kind: "UPDATED", at: new Date(T0 + 1000), actor: null, note: null, before: created, after: updated, override: null },
    ]);
  });

  it("records a deletion as the version after the last, and keeps the history once the rule is gone", async () => {
    const created = await subject.repo.create(randomUUID(), spec());
    subject.clock.advance(1000);
    await subject.repo.delete(created.id, ORIGIN);
    expect(await subject.repo.get(created.id)).toBeNull();
    expect((await subject.repo.history(created.id)).map((r) => [r.version, r.kind, r.before, r.after, r.at])).toEqual([
      [1, "CREATED", null, created, new Date(T0)],
      [2, "DELETED", created, null, new Date(T0 + 1000)],
    ]);
  });

  it("writes neither the rule nor a revision when the name is taken", async () => {
    const first = await subject.repo.create(randomUUID(), spec());
    const id = randomUUID();
    await expect(subject.repo.create(id, spec({ tenantId: first.tenantId }))).rejects.toBeInstanceOf(ConflictError);
    expect(await subject.repo.history(id)).toEqual([]);
  });

  it("returns [] for the history of an id that never existed", async () => {
    expect(await subject.repo.history(randomUUID())).toEqual([]);
  });

  it("writeAll writes every rule and its revision in one go", async () => {
    const existing = await subject.repo.create(randomUUID(), spec());
    const newId = randomUUID();
    const written = await subject.repo.writeAll(
      [
        { kind: "update", id: existing.id, spec: spec({ tenantId: existing.tenantId, limit: 1 }), version: 1 },
        { kind: "create", id: newId, spec: spec({ tenantId: existing.tenantId, name: "second" }) },
      ],
      ORIGIN,
    );
    expect(written.map((r) => [r.id, r.version, r.limit])).toEqual([
      [existing.id, 2, 1],
      [newId, 1, 100],
    ]);
    expect((await subject.repo.history(existing.id)).map((r) => [r.version, r.note])).toEqual([
      [1, null],
      [2, "because"],
    ]);
    expect((await subject.repo.history(newId)).map((r) => [r.version, r.kind, r.actor])).toEqual([[1, "CREATED", "key:ops"]]);
  });

  it("writeAll writes nothing at all, and throws a ConflictError, when one rule is no longer at its version", async () => {
    const moved = await subject.repo.create(randomUUID(), spec());
    await subject.repo.update(moved.id, spec({ tenantId: moved.tenantId, limit: 5 }), 1);
    const newId = randomUUID();
    const error = await subject.repo
      .writeAll([
        { kind: "create", id: newId, spec: spec({ tenantId: moved.tenantId, name: "first" }) },
        { kind: "update", id: moved.id, spec: spec({ tenantId: moved.tenantId, limit: 6 }), version: 1 },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConflictError);
    expect((error as Error).message).toBe("rules changed while these changes were being written, so none was written; read them again and retry");
    expect(await subject.repo.get(newId)).toBeNull();
    expect(await subject.repo.history(newId)).toEqual([]);
    expect((await subject.repo.get(moved.id))?.limit).toBe(5);
  });
}

/** Rules written before the history migration: each gets one revision holding it, readable as the service writes them. */
async function backfillCase(sql: SqlClient, prisma: PrismaClient): Promise<void> {
  const [first, ...later] = readMigrations();
  await migrate(sql, [first!]);
  await sql.query(
    `INSERT INTO rules (id, tenant_id, name, scope, resource, method, algorithm, "limit", "window", window_unit, burst, action, failure_mode, priority, enabled, version, created_at, updated_at)
     VALUES ('old-1', 'acme', 'per-user', '{USER,IP}', '/api/**', NULL, 'TOKEN_BUCKET', 5, 1, 'MINUTES', 9, 'REJECT', 'OPEN', 2, true, 1, '2026-01-01T00:00:00.001Z', '2026-01-01T00:00:00.001Z'),
            ('old-3', 'acme', 'per-ip', '{}', NULL, 'GET', 'FIXED_WINDOW', 7, 30, 'SECONDS', NULL, 'LOG_ONLY', 'CLOSED', 0, false, 3, '2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.500Z')`,
  );
  expect(later.length).toBeGreaterThan(0);
  await migrate(sql);
  const repo = new PrismaRuleRepository(prisma);
  for (const [id, kind] of [
    ["old-1", "CREATED"],
    ["old-3", "UPDATED"],
  ] as const) {
    const rule = (await repo.get(id))!;
    expect(await repo.history(id)).toEqual([
      { ruleId: id, tenantId: "acme", version: rule.version, kind, at: rule.updatedAt, actor: null, note: "recorded when rule history began", before: null, after: rule, override: null },
    ]);
  }
}

describe.runIf(await postgresAvailable())("rule history on Postgres", () => {
  const freshDatabase = freshPostgresDatabases();

  historyCases(async () => ({ kind: "postgres", url: await freshDatabase() }));

  it("the history migration gives every existing rule a revision holding it", async () => {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) });
    try {
      await backfillCase(pgSqlClient(client), prisma);
    } finally {
      await prisma.$disconnect();
      await client.end();
    }
  });
});

describe("rule history on in-memory PGlite", () => {
  historyCases(async () => ({ kind: "pglite", dataDir: null }));

  it("the history migration gives every existing rule a revision holding it", async () => {
    const db = new PGlite();
    await db.waitReady;
    const prisma = new PrismaClient({ adapter: new PrismaPGlite(db) });
    try {
      await backfillCase(pgliteSqlClient(db), prisma);
    } finally {
      await prisma.$disconnect();
      await db.close();
    }
  });
});
