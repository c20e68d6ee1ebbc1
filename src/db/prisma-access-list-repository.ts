/**
 * Access list entries and their history in Postgres (or PGlite) through
 * Prisma. An addition or removal and its row in access_list_changes are
 * written in one transaction, so the history never misses a change and never
 * holds one that did not happen. A database that cannot be reached fails
 * every call with UnavailableError. Expired entries are read by nobody; an
 * addition of an identifier whose entry has expired removes that entry first
 * (a removal in the history, by the same API key).
 *
 * The per-tenant cap is exact across instances, as the rule quota is
 * (prisma-rule-repository.ts): an addition takes its tenant's advisory lock
 * for the transaction, then counts.
 */

import { ConflictError, ValidationError } from "../domain/errors.js";
import type { AccessList, ListEntry, ListEntryChange, ListEntryChangeKind, ListEntrySpec } from "../domain/access-list.js";
import type { AccessListRepository, ListQuota } from "../domain/ports.js";
import type { Prisma, AccessListChange as ChangeRow, AccessListEntry as EntryRow, PrismaClient } from "./generated/client.js";
import { isPrismaError } from "./prisma-rule-repository.js";
import { TenantTurns } from "./tenant-turns.js";
import { unavailable } from "./unavailable.js";

/** The first key of the tenants' list locks (pg_advisory_xact_lock(int, int)), "Lst" in ASCII: apart from the rule quota's. */
const LIST_LOCKS = 0x4c7374;

export class PrismaAccessListRepository implements AccessListRepository {
  /** Adders of one tenant take turns here before their transaction (tenant-turns.ts). */
  private readonly adders = new TenantTurns();

  constructor(
    private readonly prisma: PrismaClient,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async list(): Promise<ListEntry[]> {
    return (await guard(() => this.prisma.accessListEntry.findMany({ where: this.live(), orderBy: [{ createdAt: "asc" }, { id: "asc" }] }))).map(toEntry);
  }

  async listOf(tenantId: string, list: AccessList | null): Promise<ListEntry[]> {
    const where = { ...this.live(), tenantId, ...(list === null ? {} : { list }) };
    return (await guard(() => this.prisma.accessListEntry.findMany({ where, orderBy: [{ createdAt: "asc" }, { id: "asc" }] }))).map(toEntry);
  }

  async get(id: string): Promise<ListEntry | null> {
    const row = await guard(() => this.prisma.accessListEntry.findUnique({ where: { id } }));
    return row === null ? null : toEntry(row);
  }

  async add(id: string, spec: ListEntrySpec, actor: string, quota: ListQuota): Promise<ListEntry> {
    const at = this.now();
    try {
      return await this.adders.run([spec.tenantId], () => this.prisma.$transaction(async (tx) => {
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(${LIST_LOCKS}::int, hashtext(${spec.tenantId}::text))`;
        const identity = { tenantId: spec.tenantId, list: spec.list, kind: spec.kind, value: spec.value };
        const expired = await tx.accessListEntry.findFirst({ where: { ...identity, expiresAt: { lte: at } } });
        if (expired !== null) {
          await tx.accessListEntry.delete({ where: { id: expired.id } });
          await record(tx, "REMOVED", toEntry(expired), actor, at);
        }
        // Counted once the expired entry it replaces is gone: replacing one never meets the cap.
        if ((await tx.accessListEntry.count({ where: { tenantId: spec.tenantId } })) >= quota.maxPerTenant) {
          throw new ValidationError(quota.field, `${JSON.stringify(spec.tenantId)} already holds ${quota.maxPerTenant} access list entries, the most a tenant may have: remove some first`);
        }
        const entry = toEntry(await tx.accessListEntry.create({ data: { id, ...spec, createdAt: at, createdBy: actor } }));
        await record(tx, "ADDED", entry, actor, at);
        return entry;
      }));
    } catch (error) {
      if (isPrismaError(error, "P2002")) {
        throw new ConflictError(`the ${spec.list.toLowerCase()} list of tenant ${JSON.stringify(spec.tenantId)} already holds ${spec.kind} ${JSON.stringify(spec.value)}`);
      }
      throw unavailable(error) ?? error;
    }
  }

  async remove(id: string, actor: string): Promise<ListEntry | null> {
    const at = this.now();
    try {
      return await this.prisma.$transaction(async (tx) => {
        const entry = toEntry(await tx.accessListEntry.delete({ where: { id } }));
        await record(tx, "REMOVED", entry, actor, at);
        return entry;
      });
    } catch (error) {
      if (isPrismaError(error, "P2025")) return null;
      throw unavailable(error) ?? error;
    }
  }

  private live() {
    return { OR: [{ expiresAt: null }, { expiresAt: { gt: this.now() } }] };
  }

  async history(tenantId: string): Promise<ListEntryChange[]> {
    return (await guard(() => this.prisma.accessListChange.findMany({ where: { tenantId }, orderBy: { seq: "asc" } }))).map(toChange);
  }
}

async function record(tx: Prisma.TransactionClient, kind: ListEntryChangeKind, entry: ListEntry, actor: string, at: Date): Promise<void> {
  await tx.accessListChange.create({
    data: {
      tenantId: entry.tenantId,
      entryId: entry.id,
      kind,
      changedAt: at,
      actor,
      entry: { ...entry, createdAt: entry.createdAt.toISOString(), expiresAt: entry.expiresAt?.toISOString() ?? null },
    },
  });
}

async function guard<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw unavailable(error) ?? error;
  }
}

function toEntry(row: EntryRow): ListEntry {
  const { id, tenantId, list, kind, value, note, expiresAt, createdAt, createdBy } = row;
  return { id, tenantId, list, kind, value, note, expiresAt, createdAt, createdBy };
}

function toChange(row: ChangeRow): ListEntryChange {
  const entry = row.entry as unknown as ListEntry & { createdAt: string; expiresAt: string | null };
  const expiresAt = entry.expiresAt === null ? null : new Date(entry.expiresAt);
  return { kind: row.kind, entry: { ...entry, createdAt: new Date(entry.createdAt), expiresAt }, at: row.changedAt, actor: row.actor };
}
