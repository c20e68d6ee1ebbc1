/**
 * API keys: who is calling, and their management. A secret is random (256
 * bits), shown once, and stored only as its sha256, so a hash lookup finds a
 * key and a stolen table reveals no secret.
 *
 * Each instance remembers recent lookups for API_KEY_CACHE_MS (in an LRU of
 * CACHE_ENTRIES, unknown tokens included). A revocation is published on the
 * event bus: every instance forgets the key at once, and the lookup cache's
 * expiry covers a message that got lost.
 *
 * When the database cannot be reached, a key is judged by what was last
 * known of it (KnownApiKeys): known keys keep working, revoked ones stay
 * refused, and a key never seen cannot be verified: 503 SERVICE_UNAVAILABLE
 * with Retry-After rather than 401, because 401 would tell a caller whose key
 * may well be good that it is not (clients drop or rotate credentials on 401,
 * and retry on 503); it reveals nothing either way, since any token gets it.
 * While the database is failing it is tried at most once per
 * DATABASE_RETRY_MS, so an outage costs no connection timeout per request.
 */

import { hash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { authorize, ROLES, scopeTenant, type Principal, type Role } from "../../domain/access.js";
import { NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from "../../domain/errors.js";
import { LruCache } from "../../domain/lru-cache.js";
import type { ApiKey, ApiKeyRepository, Clock, EventBus } from "../../domain/ports.js";
import { ALL_TENANTS } from "../../domain/rule.js";
import { LENGTHS } from "../../domain/service-limits.js";
import { oneOf, text } from "../../domain/validation.js";
import { CircuitBreaker } from "../../domain/circuit-breaker.js";
import type { KnownApiKeys } from "./known-api-keys.js";

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
  /** Revocations travel on it between instances. */
  events: EventBus;
  /** What is known of every key, for when the database cannot be reached. */
  known: KnownApiKeys;
}

export const BOOTSTRAP: Principal = Object.freeze({ keyId: "bootstrap", tenantId: ALL_TENANTS, role: "ADMIN" });

const CACHE_ENTRIES = 10_000;
/** How often a failing key database is tried again, and the Retry-After of a key that cannot be verified meanwhile. */
const DATABASE_RETRY_MS = 1000;

interface Lookup {
  principal: Principal | null;
  expiresAt: number;
}

export class ApiKeyService {
  private readonly recent = new LruCache<string, Lookup>({ maxEntries: CACHE_ENTRIES });
  /** Lookups in flight, by secret hash: concurrent requests of one key share one database query. */
  private readonly inFlight = new Map<string, Promise<Principal | null>>();
  private readonly database: CircuitBreaker;
  private readonly adminTokenHash: Buffer | null;

  constructor(
    private readonly repository: ApiKeyRepository,
    private readonly options: ApiKeyServiceOptions,
  ) {
    this.adminTokenHash = options.adminToken === null ? null : sha256(options.adminToken);
    this.database = new CircuitBreaker({ failureThreshold: 1, openMs: DATABASE_RETRY_MS, clock: options.clock });
  }

  /**
   * The caller behind an Authorization header ("Bearer <secret>"). `fresh`
   * asks the database even when the key was looked up recently: how an open
   * socket's key is checked again (see socket-sessions.ts).
   */
  async authenticate(authorization: string | null | undefined, { fresh = false } = {}): Promise<Principal> {
    const match = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!match) throw new UnauthenticatedError("authentication required: send Authorization: Bearer <API key or ADMIN_TOKEN>");
    const hash = sha256(match[1]!);
    if (this.adminTokenHash !== null && timingSafeEqual(hash, this.adminTokenHash)) return BOOTSTRAP;
    const principal = await this.lookup(hash.toString("hex"), fresh);
    if (principal === null || this.options.known.isRevoked(principal.keyId)) {
      throw new UnauthenticatedError("the token is not a valid API key (unknown or revoked)");
    }
    return principal;
  }

  /** Whether the key behind a principal that authenticated earlier has been revoked since, as far as this instance has heard. */
  isRevoked(principal: Principal): boolean {
    return this.options.known.isRevoked(principal.keyId);
  }

  async create(principal: Principal, input: ApiKeyInput): Promise<CreatedApiKey> {
    const spec = validate(input);
    authorize(principal, "manageKeys", spec.tenantId);
    const secret = `fg_${randomBytes(32).toString("base64url")}`;
    const secretHash = sha256(secret).toString("hex");
    const apiKey = await this.repository.create(
      { id: randomUUID(), ...spec, createdAt: new Date(this.options.clock.now()), revokedAt: null, createdBy: principal.keyId },
      secretHash,
    );
    this.options.known.learn({ secretHash, principal: principalOf(apiKey), revokedAt: null });
    return { apiKey, secret };
  }

  async revoke(principal: Principal, id: string): Promise<boolean> {
    const key = await this.visible(principal, id);
    authorize(principal, "manageKeys", key.tenantId);
    // Heard here at once (the bus delivers to this instance's listeners first), and by every other instance through the bus.
    const at = new Date(this.options.clock.now());
    await this.repository.revoke(id, at);
    await this.options.events.publish("keyRevocation", { keyId: id, at });
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

  private lookup(hash: string, fresh: boolean): Promise<Principal | null> {
    const cached = fresh ? undefined : this.recent.get(hash);
    if (cached !== undefined && cached.expiresAt > this.options.clock.now()) return Promise.resolve(cached.principal);
    let pending = this.inFlight.get(hash);
    if (pending === undefined) {
      pending = this.fetch(hash).finally(() => this.inFlight.delete(hash));
      this.inFlight.set(hash, pending);
    }
    return pending;
  }

  /** From the database when it answers (and remembered), else from what was last known of the key. */
  private async fetch(hash: string): Promise<Principal | null> {
    if (this.database.allows()) {
      try {
        const key = await this.repository.findBySecretHash(hash);
        this.database.succeeded();
        if (key !== null) this.options.known.learn({ secretHash: hash, principal: principalOf(key), revokedAt: key.revokedAt });
        const principal = key === null || key.revokedAt !== null ? null : principalOf(key);
        this.recent.set(hash, { principal, expiresAt: this.options.clock.now() + this.options.cacheMs });
        return principal;
      } catch (error) {
        if (!(error instanceof UnavailableError)) {
          // The database answered, if not as it should: nothing to wait for.
          this.database.succeeded();
          throw error;
        }
        this.database.failed();
      }
    }
    const known = this.options.known.find(hash);
    if (known === undefined) {
      throw new UnavailableError("the key database is unreachable and this API key was not known before it went away: try again shortly", {
        retryAfter: DATABASE_RETRY_MS / 1000,
      });
    }
    return known;
  }

  /** A revoked key, heard of on the event bus (see event-listeners.ts), revoked here or by another instance: refused from now on. */
  forget(keyId: string, at: Date): void {
    this.options.known.revoke(keyId, at);
    this.recent.deleteWhere((_hash, lookup) => lookup.principal?.keyId === keyId);
  }
}

function validate(input: ApiKeyInput): ApiKeyInput {
  const tenantId = text(input.tenantId, "input.tenantId", LENGTHS.tenantId);
  const name = text(input.name, "input.name", LENGTHS.apiKeyName);
  const role = oneOf(input.role, ROLES, "input.role");
  if (role === "ADMIN" && tenantId !== ALL_TENANTS) throw new ValidationError("input.tenantId", 'must be "*" for an ADMIN key: ADMIN acts on every tenant');
  if (role !== "ADMIN" && tenantId === ALL_TENANTS) throw new ValidationError("input.tenantId", `cannot be "*" for a ${role} key: only ADMIN keys span tenants`);
  return { tenantId, role, name };
}

function principalOf(key: ApiKey): Principal {
  return { keyId: key.id, tenantId: key.tenantId, role: key.role };
}

/** crypto.hash, one call: about a third of a createHash chain's cost, on the path of every request that authenticates. */
function sha256(text: string): Buffer {
  return hash("sha256", text, "buffer");
}
