/** API keys in Postgres (or PGlite) through Prisma; the secret itself is never stored. */

import type { Role } from "../domain/access.js";
import type { ApiKey, ApiKeyCredential, ApiKeyRepository } from "../domain/ports.js";
import type { ApiKey as ApiKeyRow, PrismaClient } from "./generated/client.js";
import { unavailable } from "./unavailable.js";

export class PrismaApiKeyRepository implements ApiKeyRepository {
  constructor(private readonly prisma: PrismaClient) {}

  async create(key: ApiKey, secretHash: string): Promise<ApiKey> {
    return toApiKey(await this.guard(() => this.prisma.apiKey.create({ data: { ...key, secretHash } })));
  }

  async get(id: string): Promise<ApiKey | null> {
    const row = await this.guard(() => this.prisma.apiKey.findUnique({ where: { id } }));
    return row === null ? null : toApiKey(row);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKey | null> {
    const row = await this.guard(() => this.prisma.apiKey.findUnique({ where: { secretHash } }));
    return row === null ? null : toApiKey(row);
  }

  async credentials(): Promise<ApiKeyCredential[]> {
    const rows = await this.guard(() =>
      this.prisma.apiKey.findMany({ select: { id: true, tenantId: true, role: true, secretHash: true, revokedAt: true }, orderBy: { id: "asc" } }),
    );
    return rows.map((row) => ({
      secretHash: row.secretHash,
      principal: { keyId: row.id, tenantId: row.tenantId, role: row.role as Role },
      revokedAt: row.revokedAt,
    }));
  }

  async list(tenantId: string | null): Promise<ApiKey[]> {
    const rows = await this.guard(() =>
      this.prisma.apiKey.findMany({ where: tenantId === null ? {} : { tenantId }, orderBy: [{ createdAt: "desc" }, { id: "asc" }] }),
    );
    return rows.map(toApiKey);
  }

  async revoke(id: string, at: Date): Promise<ApiKey | null> {
    // Only the first revocation is recorded: revoking again keeps the original time.
    await this.guard(() => this.prisma.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: at } }));
    return this.get(id);
  }

  private async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }
}

function toApiKey(row: ApiKeyRow): ApiKey {
  const { secretHash: _secretHash, ...key } = row;
  return { ...key, role: row.role as Role };
}
