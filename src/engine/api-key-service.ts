/**
 * API keys: who is calling, and their management. A secret is random (256
 * bits), shown once, and stored only as its sha256, so a hash lookup finds a
 * key and a stolen table reveals no secret. Each instance remembers recent
 * lookups for a few seconds: a revoked key stops working at once on the
 * instance that revoked it, and within that time everywhere else.
 */

import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { authorize, ROLES, scopeTenant, type Principal, type Role } from "../domain/access.js";
import { NotFoundError, UnauthenticatedError, ValidationError } from "../domain/errors.js";
import type { ApiKey, ApiKeyRepository, Clock } from "../domain/ports.js";
import { LIMITS } from "../domain/request.js";
import { ALL_TENANTS } from "../domain/rule.js";
import { oneOf, text } from "../domain/validation.js";

export interface CreatedApiKey {
  apiKey: ApiKey;
  secret: string;
}

export interface ApiKeyInput {
  tenantId: string;
  role: Role;
  name: string;
}

export interface ApiKeyServiceOptions {
  /** ADMIN_TOKEN: a bootstrap secret with every right. */
  adminToken: string | null;
  clock: Clock;
  /** How long a looked-up key is remembered. */
  cacheMs: number;
}

export const BOOTSTRAP: Principal = Object.freeze({ keyId: "bootstrap", tenantId: ALL_TENANTS, role: "ADMIN" });

const CACHE_ENTRIES = 10_000;

export class ApiKeyService {
  private readonly known = new Map<string, { principal: Principal | null; expiresAt: number }>();
  private readonly adminTokenHash: Buffer | null;

  constructor(
    private readonly repository: ApiKeyRepository,
    private readonly options: ApiKeyServiceOptions,
  ) {
    this.adminTokenHash = options.adminToken === null ? null : sha256(options.adminToken);
  }

  /** The caller behind an Authorization header ("Bearer <secret>"). */
  async authenticate(authorization: string | null | undefined): Promise<Principal> {
    const match = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!match) throw new UnauthenticatedError("authentication required: send Authorization: Bearer <API key or ADMIN_TOKEN>");
    const hash = sha256(match[1]!);
    if (this.adminTokenHash !== null && timingSafeEqual(hash, this.adminTokenHash)) return BOOTSTRAP;
    const principal = await this.lookup(hash.toString("hex"));
    if (principal === null) throw new UnauthenticatedError("the token is not a valid API key (unknown or revoked)");
    return principal;
  }

  async create(principal: Principal, input: ApiKeyInput): Promise<CreatedApiKey> {
    const spec = validate(input);
    authorize(principal, "manageKeys", spec.tenantId);
    const secret = `fg_${randomBytes(32).toString("base64url")}`;
    const apiKey = await this.repository.create(
      { id: randomUUID(), ...spec, createdAt: new Date(this.options.clock.now()), revokedAt: null, createdBy: principal.keyId },
      sha256(secret).toString("hex"),
    );
    return { apiKey, secret };
  }

  async revoke(principal: Principal, id: string): Promise<boolean> {
    const key = await this.visible(principal, id);
    authorize(principal, "manageKeys", key.tenantId);
    await this.repository.revoke(id, new Date(this.options.clock.now()));
    for (const [hash, entry] of this.known) if (entry.principal?.keyId === id) this.known.delete(hash);
    return true;
  }

  async list(principal: Principal, tenantId: string | null | undefined): Promise<ApiKey[]> {
    return this.repository.list(scopeTenant(principal, "manageKeys", tenantId));
  }

  /** A key the caller may see, or NOT_FOUND: another tenant's key ids reveal nothing. */
  private async visible(principal: Principal, id: string): Promise<ApiKey> {
    const key = await this.repository.get(id);
    if (key === null || (principal.role !== "ADMIN" && key.tenantId !== principal.tenantId)) throw new NotFoundError("API key", id);
    return key;
  }

  private async lookup(hash: string): Promise<Principal | null> {
    const now = this.options.clock.now();
    const cached = this.known.get(hash);
    if (cached && cached.expiresAt > now) return cached.principal;
    const key = await this.repository.findBySecretHash(hash);
    const principal = key === null || key.revokedAt !== null ? null : { keyId: key.id, tenantId: key.tenantId, role: key.role };
    if (this.known.size >= CACHE_ENTRIES) this.known.delete(this.known.keys().next().value!);
    this.known.set(hash, { principal, expiresAt: now + this.options.cacheMs });
    return principal;
  }
}

function validate(input: ApiKeyInput): ApiKeyInput {
  const tenantId = text(input.tenantId, "input.tenantId", LIMITS.tenantId);
  const name = text(input.name, "input.name", 200);
  const role = oneOf(input.role, ROLES, "input.role");
  if (role === "ADMIN" && tenantId !== ALL_TENANTS) throw new ValidationError("input.tenantId", 'must be "*" for an ADMIN key: ADMIN acts on every tenant');
  if (role !== "ADMIN" && tenantId === ALL_TENANTS) throw new ValidationError("input.tenantId", `cannot be "*" for a ${role} key: only ADMIN keys span tenants`);
  return { tenantId, role, name };
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}
