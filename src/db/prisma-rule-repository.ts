/**
 * Rules in Postgres (or PGlite) through Prisma. A database that cannot be
 * reached fails every call with UnavailableError, which the API reports as
 * SERVICE_UNAVAILABLE; each write is one statement, so nothing half-happens.
 */

import { ConflictError } from "../domain/errors.js";
import type { RuleRepository } from "../domain/ports.js";
import type { HttpMethod, Rule, RuleSpec } from "../domain/rule.js";
import type { PrismaClient, Rule as RuleRow } from "./generated/client.js";
import { unavailable } from "./unavailable.js";

export class PrismaRuleRepository implements RuleRepository {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async list(): Promise<Rule[]> {
    try {
      return (await this.prisma.rule.findMany({ orderBy: [{ tenantId: "asc" }, { name: "asc" }] })).map(toRule);
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }

  async get(id: string): Promise<Rule | null> {
    try {
      const row = await this.prisma.rule.findUnique({ where: { id } });
      return row === null ? null : toRule(row);
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }

  async create(id: string, spec: RuleSpec): Promise<Rule> {
    const at = this.now();
    try {
      return toRule(await this.prisma.rule.create({ data: { ...spec, id, version: 1, createdAt: at, updatedAt: at } }));
    } catch (error) {
      throw uniqueNameConflict(error, spec) ?? unavailable(error) ?? error;
    }
  }

  async update(id: string, spec: RuleSpec, version: number): Promise<Rule | null> {
    try {
      const row = await this.prisma.rule.update({
        where: { id, version },
        data: { ...spec, version: version + 1, updatedAt: this.now() },
      });
      return toRule(row);
    } catch (error) {
      if (isPrismaError(error, "P2025")) return null;
      throw uniqueNameConflict(error, spec) ?? unavailable(error) ?? error;
    }
  }

  async delete(id: string): Promise<Rule | null> {
    try {
      return toRule(await this.prisma.rule.delete({ where: { id } }));
    } catch (error) {
      if (isPrismaError(error, "P2025")) return null;
      throw unavailable(error) ?? error;
    }
  }

  async close(): Promise<void> {
    await this.prisma.$disconnect();
  }
}

function toRule(row: RuleRow): Rule {
  return { ...row, method: row.method as HttpMethod | null };
}

function uniqueNameConflict(error: unknown, spec: RuleSpec): ConflictError | null {
  if (!isPrismaError(error, "P2002")) return null;
  return new ConflictError(`input.name: tenant ${JSON.stringify(spec.tenantId)} already has a rule named ${JSON.stringify(spec.name)}`);
}

function isPrismaError(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}
