/**
 * Rules and their history in Postgres (or PGlite) through Prisma. Every write
 * records its revision in the same transaction, so the history never misses a
 * change and never holds one that did not happen. A database that cannot be
 * reached fails every call with UnavailableError (SERVICE_UNAVAILABLE), and a
 * transaction that fails writes nothing.
 *
 * The rule quota is exact across instances: a transaction that creates rules
 * in a tenant first takes that tenant's advisory lock (held until it commits
 * or rolls back), then counts the tenant's rules. Creators of one tenant thus
 * take turns, and under READ COMMITTED the count, read after the lock, sees
 * every rule the previous holder committed. A check-then-insert without the
 * lock lets every concurrent creator see the same count and all insert.
 */

import { ConflictError, RuleQuotaError } from "../domain/errors.js";
import type { RuleChangeKind } from "../domain/events.js";
import { creationsByTenant, type RuleRepository, type RuleWrite } from "../domain/ports.js";
import { UNKNOWN_ORIGIN, type ChangeOrigin, type RuleRevision } from "../domain/revision.js";
import type { AttributeCondition } from "../domain/attributes.js";
import type { HttpMethod, Rule, RuleSpec } from "../domain/rule.js";
import { Prisma, type PrismaClient, type Rule as RuleRow, type RuleRevision as RevisionRow } from "./generated/client.js";
import { unavailable } from "./unavailable.js";

type Transaction = Prisma.TransactionClient;

/** A batch of many writes may take longer than Prisma's default 5 s for one interactive transaction. */
const BATCH_TIMEOUT_MS = 60_000;

/** The first key of the tenants' quota locks (pg_advisory_xact_lock(int, int)), "Flo" in ASCII: apart from any other advisory lock. */
const QUOTA_LOCKS = 0x466c6f;

export class PrismaRuleRepository implements RuleRepository {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async list(): Promise<Rule[]> {
    return (await reading(() => this.prisma.rule.findMany({ orderBy: [{ tenantId: "asc" }, { name: "asc" }] }))).map(toRule);
  }

  async get(id: string): Promise<Rule | null> {
    const row = await reading(() => this.prisma.rule.findUnique({ where: { id } }));
    return row === null ? null : toRule(row);
  }

  async create(id: string, spec: RuleSpec, origin: ChangeOrigin = UNKNOWN_ORIGIN, maxRulesPerTenant = Number.POSITIVE_INFINITY): Promise<Rule> {
    try {
      return await this.prisma.$transaction(async (tx) => {
        await withinQuota(tx, new Map([[spec.tenantId, 1]]), maxRulesPerTenant);
        return this.createIn(tx, id, spec, origin, this.now());
      });
    } catch (error) {
      throw uniqueNameConflict(error, spec) ?? unavailable(error) ?? error;
    }
  }

  async update(id: string, spec: RuleSpec, version: number, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<Rule | null> {
    try {
      return await this.prisma.$transaction((tx) => this.updateIn(tx, id, spec, version, origin, this.now()));
    } catch (error) {
      if (isPrismaError(error, "P2025")) return null;
      throw uniqueNameConflict(error, spec) ?? unavailable(error) ?? error;
    }
  }

  async delete(id: string, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<Rule | null> {
    try {
      return await this.prisma.$transaction(async (tx) => {
        const rule = toRule(await tx.rule.delete({ where: { id } }));
        await record(tx, { kind: "DELETED", version: rule.version + 1, before: rule, after: null, origin, at: this.now() });
        return rule;
      });
    } catch (error) {
      if (isPrismaError(error, "P2025")) return null;
      throw unavailable(error) ?? error;
    }
  }

  async writeAll(writes: readonly RuleWrite[], origin: ChangeOrigin = UNKNOWN_ORIGIN, maxRulesPerTenant = Number.POSITIVE_INFINITY): Promise<Rule[]> {
    const at = this.now();
    try {
      return await this.prisma.$transaction(
        async (tx) => {
          await withinQuota(tx, creationsByTenant(writes), maxRulesPerTenant);
          const written: Rule[] = [];
          for (const write of writes) {
            const rule =
              write.kind === "create"
                ? await this.createIn(tx, write.id, write.spec, origin, at)
                : await this.updateIn(tx, write.id, write.spec, write.version, origin, at);
            if (rule === null) throw movedOn();
            written.push(rule);
          }
          return written;
        },
        { timeout: BATCH_TIMEOUT_MS },
      );
    } catch (error) {
      if (isPrismaError(error, "P2025") || isPrismaError(error, "P2002")) throw movedOn();
      throw unavailable(error) ?? error;
    }
  }

  async history(id: string): Promise<RuleRevision[]> {
    return (await reading(() => this.prisma.ruleRevision.findMany({ where: { ruleId: id }, orderBy: { version: "asc" } }))).map(toRevision);
  }

  async close(): Promise<void> {
    await this.prisma.$disconnect();
  }

  private async createIn(tx: Transaction, id: string, spec: RuleSpec, origin: ChangeOrigin, at: Date): Promise<Rule> {
    const rule = toRule(await tx.rule.create({ data: { ...ruleRowOf(spec), id, version: 1, createdAt: at, updatedAt: at } }));
    await record(tx, { kind: "CREATED", version: 1, before: null, after: rule, origin, at });
    return rule;
  }

  /** Null when the rule is gone or past `version`; a writer that slips in between the read and the write fails the update with P2025. */
  private async updateIn(tx: Transaction, id: string, spec: RuleSpec, version: number, origin: ChangeOrigin, at: Date): Promise<Rule | null> {
    const before = await tx.rule.findUnique({ where: { id } });
    if (before === null || before.version !== version) return null;
    const rule = toRule(await tx.rule.update({ where: { id, version }, data: { ...ruleRowOf(spec), version: version + 1, updatedAt: at } }));
    await record(tx, { kind: "UPDATED", version: rule.version, before: toRule(before), after: rule, origin, at });
    return rule;
  }
}

/**
 * Fails with RuleQuotaError unless every tenant stays within `max` rules
 * with its `creations`; holds each tenant's lock until the transaction ends
 * (see the header). Tenants are locked in one order, so that two writers of
 * the same tenants never wait for each other both ways.
 */
async function withinQuota(tx: Transaction, creations: ReadonlyMap<string, number>, max: number): Promise<void> {
  if (max === Number.POSITIVE_INFINITY) return;
  for (const tenantId of [...creations.keys()].sort()) {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${QUOTA_LOCKS}::int, hashtext(${tenantId}::text))`;
    const wouldHave = (await tx.rule.count({ where: { tenantId } })) + creations.get(tenantId)!;
    if (wouldHave > max) throw new RuleQuotaError(tenantId, wouldHave, max);
  }
}

async function reading<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw unavailable(error) ?? error;
  }
}

interface RevisionInput {
  kind: RuleChangeKind;
  version: number;
  before: Rule | null;
  after: Rule | null;
  origin: ChangeOrigin;
  at: Date;
}

async function record(tx: Transaction, revision: RevisionInput): Promise<void> {
  const rule = (revision.after ?? revision.before)!;
  await tx.ruleRevision.create({
    data: {
      ruleId: rule.id,
      version: revision.version,
      tenantId: rule.tenantId,
      kind: revision.kind,
      changedAt: revision.at,
      actor: revision.origin.actor,
      note: revision.origin.note,
      before: snapshot(revision.before),
      after: snapshot(revision.after),
    },
  });
}

/** A rule as JSON for the revisions table: dates as ISO text. */
function snapshot(rule: Rule | null): Prisma.InputJsonObject | typeof Prisma.DbNull {
  if (rule === null) return Prisma.DbNull;
  return { ...ruleRowOf(rule), createdAt: rule.createdAt.toISOString(), updatedAt: rule.updatedAt.toISOString() };
}

function fromSnapshot(json: Prisma.JsonValue): Rule | null {
  if (json === null) return null;
  const rule = json as unknown as Rule & { createdAt: string; updatedAt: string };
  // Revisions written before rules had a reach or attributes hold REGIONAL rules without attributes, as every rule was.
  return { ...rule, reach: rule.reach ?? "REGIONAL", attributeKeys: rule.attributeKeys ?? [], when: rule.when ?? [], createdAt: new Date(rule.createdAt), updatedAt: new Date(rule.updatedAt) };
}

function toRevision(row: RevisionRow): RuleRevision {
  return {
    ruleId: row.ruleId,
    tenantId: row.tenantId,
    version: row.version,
    kind: row.kind,
    at: row.changedAt,
    actor: row.actor,
    note: row.note,
    before: fromSnapshot(row.before),
    after: fromSnapshot(row.after),
  };
}

function toRule(row: RuleRow): Rule {
  return { ...row, method: row.method as HttpMethod | null, when: row.when as unknown as AttributeCondition[] };
}

/** A rule's fields as Prisma writes them: the conditions as JSON. */
export function ruleRowOf<T extends RuleSpec>(spec: T): Omit<T, "when"> & { when: Prisma.InputJsonArray } {
  return { ...spec, when: spec.when.map(({ key, values }) => ({ key, values })) };
}

function movedOn(): ConflictError {
  return new ConflictError("rules changed while these changes were being written, so none was written; read them again and retry");
}

function uniqueNameConflict(error: unknown, spec: RuleSpec): ConflictError | null {
  if (!isPrismaError(error, "P2002")) return null;
  return new ConflictError(`input.name: tenant ${JSON.stringify(spec.tenantId)} already has a rule named ${JSON.stringify(spec.name)}`);
}

function isPrismaError(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}
