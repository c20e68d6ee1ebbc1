/** Bans in Postgres (or PGlite) through Prisma; one row per tenant, dimension and value (the unique index). */

import type { Ban, BanDimension, BanSpec } from "../domain/ban.js";
import type { BanRepository } from "../domain/ports.js";
import type { Ban as BanRow, PrismaClient } from "./generated/client.js";
import { unavailable } from "./unavailable.js";

export class PrismaBanRepository implements BanRepository {
  constructor(private readonly prisma: PrismaClient) {}

  async put(id: string, spec: BanSpec, createdBy: string, createdAt: Date): Promise<Ban> {
    const { tenantId, dimension, value, until, note } = spec;
    // An upsert on the unique index: two instances banning the same value at once leave one row, with the first one's id.
    const row = await this.guard(() =>
      this.prisma.ban.upsert({
        where: { tenantId_dimension_value: { tenantId, dimension, value } },
        create: { id, tenantId, dimension, value, until, note, createdAt, createdBy },
        update: { until, note, createdAt, createdBy },
      }),
    );
    return toBan(row);
  }

  async get(id: string): Promise<Ban | null> {
    const row = await this.guard(() => this.prisma.ban.findUnique({ where: { id } }));
    return row === null ? null : toBan(row);
  }

  async delete(id: string): Promise<Ban | null> {
    const [[row]] = await this.guard(() => this.prisma.$transaction([this.prisma.ban.findMany({ where: { id } }), this.prisma.ban.deleteMany({ where: { id } })]));
    return row === undefined ? null : toBan(row);
  }

  async live(tenantId: string | null, now: Date): Promise<Ban[]> {
    const rows = await this.guard(() =>
      this.prisma.ban.findMany({
        where: { until: { gt: now }, ...(tenantId === null ? {} : { tenantId }) },
        orderBy: [{ tenantId: "asc" }, { dimension: "asc" }, { value: "asc" }],
      }),
    );
    return rows.map(toBan);
  }

  private async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }
}

function toBan(row: BanRow): Ban {
  return { ...row, dimension: row.dimension as BanDimension };
}
