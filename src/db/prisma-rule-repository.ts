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
import type { Override, OverrideSpec } from "../domain/override.js";
import { creationsByTenant, type OverrideWrite, type RuleRepository, type RuleWrite } from "../domain/ports.js";
import { UNKNOWN_ORIGIN, type ChangeOrigin, type RuleRevision } from "../domain/revision.js";
import type { AttributeCondition } from "../domain/attributes.js";
import type { Calendar } from "../domain/calendar.js";
import { withLaterFields, type AutoBan, type Dimension, type HttpMethod, type Rule, type RuleSpec } from "../domain/rule.js";
import { Prisma, type PrismaClient, type Rule as RuleRow, type RuleOverride as OverrideRow, type RuleRevision as RevisionRow } from "./generated/client.js";
import { TenantTurns } from "./tenant-turns.js";
import { unavailable } from "./unavailable.js";

type Transaction = Prisma.TransactionClient;

/** A batch of many writes may take longer than Prisma's default 5 s for one interactive transaction. */
const BATCH_TIMEOUT_MS = 60_000;

/** The first key of the tenants' quota locks (pg_advisory_xact_lock(int, int)), "Flo" in ASCII: apart from any other advisory lock. */
const QUOTA_LOCKS = 0x466c6f;

export class PrismaRuleRepository implements RuleRepository {
  /** Creators of one tenant take turns here before their transaction (tenant-turns.ts). */
  private readonly creators = new TenantTurns();

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
      return await this.creators.run([spec.tenantId], () =>
        this.prisma.$transaction(async (tx) => {
          await withinQuota(tx, new Map([[spec.tenantId, 1]]), maxRulesPerTenant);
          return this.createIn(tx, id, spec, origin, this.now());
        }),
      );
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
    const creations = creationsByTenant(writes);
    try {
      return await this.creators.run(creations.keys(), () => this.prisma.$transaction(
        async (tx) => {
          await withinQuota(tx, creations, maxRulesPerTenant);
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
      ));
    } catch (error) {
      if (isPrismaError(error, "P2025") || isPrismaError(error, "P2002")) throw movedOn();
      throw unavailable(error) ?? error;
    }
  }

  async history(id: string): Promise<RuleRevision[]> {
    return (await reading(() => this.prisma.ruleRevision.findMany({ where: { ruleId: id }, orderBy: { version: "asc" } }))).map(toRevision);
  }

  async setOverride(id: string, spec: OverrideSpec, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<OverrideWrite | null> {
    const at = this.now();
    try {
      return await this.prisma.$transaction(async (tx) => {
        const bumped = await nextVersion(tx, spec.ruleId, at);
        if (bumped === null) return null;
        const target = targetOf(spec);
        const identity = { ruleId: spec.ruleId, target, match: spec.match, identifier: spec.identifier };
        const existing = await tx.ruleOverride.findUnique({ where: { ruleId_target_match_identifier: identity } });
        const fields = {
          limit: spec.limit,
          burst: spec.burst,
          window: spec.window,
          windowUnit: spec.windowUnit,
          expiresAt: spec.expiresAt,
          note: spec.note,
          actor: origin.actor,
          version: bumped.rule.version,
          updatedAt: at,
        };
        const row =
          existing === null
            ? await tx.ruleOverride.create({ data: { ...identity, ...fields, id, tenantId: bumped.rule.tenantId, createdAt: at } })
            : await tx.ruleOverride.update({ where: { id: existing.id }, data: fields });
        const override = toOverride(row);
        const before = existing === null ? null : toOverride(existing);
        const note = withNote(origin, `override set: ${describeOverride(override)}`);
        await record(tx, { kind: "UPDATED", version: bumped.rule.version, before: bumped.before, after: bumped.rule, origin: note, at, override: { before, after: override } });
        return { rule: bumped.rule, override };
      });
    } catch (error) {
      if (isPrismaError(error, "P2002")) throw new ConflictError("input: the same override was being set at the same time; read it again and retry");
      throw unavailable(error) ?? error;
    }
  }

  async deleteOverride(id: string, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<OverrideWrite | null> {
    const at = this.now();
    try {
      return await this.prisma.$transaction(async (tx) => {
        const existing = await tx.ruleOverride.findUnique({ where: { id } });
        if (existing === null) return null;
        const bumped = await nextVersion(tx, existing.ruleId, at);
        if (bumped === null) return null;
        await tx.ruleOverride.delete({ where: { id } });
        const override = { ...toOverride(existing), version: bumped.rule.version };
        const note = withNote(origin, `override deleted: ${describeOverride(override)}`);
        await record(tx, { kind: "UPDATED", version: bumped.rule.version, before: bumped.before, after: bumped.rule, origin: note, at, override: { before: toOverride(existing), after: null } });
        return { rule: bumped.rule, override };
      });
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }

  async getOverride(id: string): Promise<Override | null> {
    const row = await reading(() => this.prisma.ruleOverride.findUnique({ where: { id } }));
    return row === null ? null : toOverride(row);
  }

  async listOverrides(): Promise<Override[]> {
    const now = this.now();
    return (await reading(() => this.prisma.ruleOverride.findMany({ where: { OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] } }))).map(toOverride);
  }

  async changeMark(): Promise<string> {
    // Every write records a revision numbered from one sequence, so the latest number moves with every write, a rule
    // created and deleted between two reads included (the live tables are then as they were), and is read from its index
    // whatever the history's length (counting the revisions instead took about 20 ms of Postgres at 300,000).
    // A number is drawn when its revision is written, so a write committed after a later-numbered one leaves the latest
    // number as it was: the tables' counts, latest writes and version sums move with it then (any one write changes
    // one of them), as they do for a row written by hand. What none tells waits for the periodic full reload.
    const [revisions, rules, overrides] = await reading(() =>
      Promise.all([
        // The latest by its order, not an aggregate: Prisma writes _max over a subquery, which scans the whole table.
        this.prisma.ruleRevision.findFirst({ select: { seq: true }, orderBy: { seq: "desc" } }),
        this.prisma.rule.aggregate({ _count: { _all: true }, _max: { updatedAt: true }, _sum: { version: true } }),
        this.prisma.ruleOverride.aggregate({ _count: { _all: true }, _max: { updatedAt: true }, _sum: { version: true } }),
      ]),
    );
    return [
      revisions?.seq ?? "",
      rules._count._all,
      rules._max.updatedAt?.getTime() ?? "",
      rules._sum.version ?? 0,
      overrides._count._all,
      overrides._max.updatedAt?.getTime() ?? "",
      overrides._sum.version ?? 0,
    ].join(":");
  }

  async pageOverrides(ruleId: string, first: number, after: string | null): Promise<Override[]> {
    const rows = await reading(() =>
      this.prisma.ruleOverride.findMany({ where: { ruleId, ...(after === null ? {} : { id: { gt: after } }) }, orderBy: { id: "asc" }, take: first }),
    );
    return rows.map(toOverride);
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
  override?: { before: Override | null; after: Override | null };
}

/**
 * Takes the rule to its next version for a change to one of its overrides,
 * holding its row until the transaction ends so that its changes take turns;
 * null when the rule is gone.
 */
async function nextVersion(tx: Transaction, ruleId: string, at: Date): Promise<{ before: Rule; rule: Rule } | null> {
  const locked = await tx.$queryRaw<{ id: string }[]>`SELECT "id" FROM "rules" WHERE "id" = ${ruleId} FOR UPDATE`;
  if (locked.length === 0) return null;
  const before = toRule((await tx.rule.findUnique({ where: { id: ruleId } }))!);
  const rule = toRule(await tx.rule.update({ where: { id: ruleId }, data: { version: before.version + 1, updatedAt: at } }));
  return { before, rule };
}

function withNote(origin: ChangeOrigin, note: string): ChangeOrigin {
  return { actor: origin.actor, note: origin.note ?? note };
}

function describeOverride(o: Override): string {
  const window = o.window === null ? "" : ` per ${o.window} ${o.windowUnit!.toLowerCase()}`;
  return `${o.dimension ?? `attribute ${o.attributeKey}`} ${o.match.toLowerCase()} ${JSON.stringify(o.identifier)}, limit ${o.limit}${window}`;
}

function targetOf(spec: Pick<OverrideSpec, "dimension" | "attributeKey">): string {
  return spec.dimension ?? `attr.${spec.attributeKey}`;
}

function toOverride(row: OverrideRow): Override {
  const attribute = row.target.startsWith("attr.") ? row.target.slice("attr.".length) : null;
  return {
    id: row.id,
    tenantId: row.tenantId,
    ruleId: row.ruleId,
    dimension: attribute === null ? (row.target as Dimension) : null,
    attributeKey: attribute,
    match: row.match,
    identifier: row.identifier,
    limit: row.limit,
    burst: row.burst,
    window: row.window,
    windowUnit: row.windowUnit,
    expiresAt: row.expiresAt,
    note: row.note,
    actor: row.actor,
    version: row.version,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

function overrideJson(override: Override | null): Prisma.InputJsonValue | null {
  return override === null ? null : { ...override, expiresAt: override.expiresAt?.toISOString() ?? null, createdAt: override.createdAt.toISOString(), updatedAt: override.updatedAt.toISOString() };
}

function overrideOfJson(json: Prisma.JsonValue | undefined): Override | null {
  if (json === null || json === undefined) return null;
  const o = json as unknown as Override & { expiresAt: string | null; createdAt: string; updatedAt: string };
  return { ...o, expiresAt: o.expiresAt === null ? null : new Date(o.expiresAt), createdAt: new Date(o.createdAt), updatedAt: new Date(o.updatedAt) };
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
      override: revision.override === undefined ? Prisma.DbNull : { before: overrideJson(revision.override.before), after: overrideJson(revision.override.after) },
    },
  });
}

/** A rule as JSON for the revisions table: dates as ISO text. */
function snapshot(rule: Rule | null): Prisma.InputJsonObject | typeof Prisma.DbNull {
  if (rule === null) return Prisma.DbNull;
  return {
    ...ruleRowOf(rule),
    calendar: rule.calendar === null ? null : calendarJson(rule.calendar),
    autoBan: autoBanJson(rule.autoBan),
    createdAt: rule.createdAt.toISOString(),
    updatedAt: rule.updatedAt.toISOString(),
  };
}

function fromSnapshot(json: Prisma.JsonValue): Rule | null {
  if (json === null) return null;
  const rule = json as unknown as Rule & { createdAt: string; updatedAt: string };
  return withLaterFields({ ...rule, autoBan: autoBanOfJson(rule.autoBan), createdAt: new Date(rule.createdAt), updatedAt: new Date(rule.updatedAt) });
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
    override: row.override === null ? null : { before: overrideOfJson((row.override as Prisma.JsonObject).before), after: overrideOfJson((row.override as Prisma.JsonObject).after) },
  };
}

function toRule(row: RuleRow): Rule {
  return {
    ...row,
    method: row.method as HttpMethod | null,
    when: row.when as unknown as AttributeCondition[],
    calendar: row.calendar as unknown as Calendar | null,
    autoBan: autoBanOfJson(row.autoBan),
  };
}

/** JSONB keeps an object's keys in its own order: the autoBan is rebuilt in the domain's, so that equal ones print and compare alike. */
function autoBanOfJson(json: unknown): AutoBan | null {
  if (json === null || json === undefined) return null;
  const { refusals, withinSeconds, banSeconds } = json as AutoBan;
  return { refusals, withinSeconds, banSeconds };
}

/** A rule's fields as Prisma writes them: the conditions, the calendar and the autoBan as JSON (none: SQL NULL). */
export function ruleRowOf<T extends RuleSpec>(
  spec: T,
): Omit<T, "when" | "calendar" | "autoBan"> & { when: Prisma.InputJsonArray; calendar: Prisma.InputJsonObject | typeof Prisma.DbNull; autoBan: Prisma.InputJsonObject | typeof Prisma.DbNull } {
  return {
    ...spec,
    when: spec.when.map(({ key, values }) => ({ key, values })),
    calendar: spec.calendar === null ? Prisma.DbNull : calendarJson(spec.calendar),
    autoBan: autoBanJson(spec.autoBan) ?? Prisma.DbNull,
  };
}

function calendarJson({ period, timeZone, weekStartsOn }: Calendar): Prisma.InputJsonObject {
  return { period, timeZone, weekStartsOn };
}

function autoBanJson(autoBan: AutoBan | null): Prisma.InputJsonObject | null {
  return autoBan === null ? null : { refusals: autoBan.refusals, withinSeconds: autoBan.withinSeconds, banSeconds: autoBan.banSeconds };
}

function movedOn(): ConflictError {
  return new ConflictError("rules changed while these changes were being written, so none was written; read them again and retry");
}

function uniqueNameConflict(error: unknown, spec: RuleSpec): ConflictError | null {
  if (!isPrismaError(error, "P2002")) return null;
  return new ConflictError(`input.name: tenant ${JSON.stringify(spec.tenantId)} already has a rule named ${JSON.stringify(spec.name)}`);
}

export function isPrismaError(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}
