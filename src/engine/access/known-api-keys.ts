/**
 * The last-known-good API keys: every key the database had at the last full
 * load (every RULE_RELOAD_MS), plus the keys looked up since, each with
 * whether it is revoked. Authentication answers from here only when the
 * database cannot be reached, so that a Postgres outage does not stop the
 * checks of every API-key caller, and a revoked key stays refused through it.
 *
 * - Revocation is for ever: a revocation heard here (made on this instance,
 *   or on another and carried by the event bus) stands even against a full
 *   load that read the table just before it.
 * - With DATABASE_URL the copy is kept on disk too (ApiKeySnapshot, beside the
 *   rules' snapshot; secret hashes only), so a service that starts while the
 *   database is down still knows the keys it knew.
 * - A key created after the last load and never used on this instance is not
 *   known here; during an outage it cannot be verified (503, see
 *   api-key-service.ts). So is a key revoked while a revocation message was
 *   lost and before the next load: it is accepted until the database answers.
 *
 * Memory: one entry per key ever created (about 200 bytes each), like the
 * rule book's one per rule.
 */

import type { Principal } from "../../domain/access.js";
import { UnavailableError } from "../../domain/errors.js";
import type { ApiKeyCredential, ApiKeyRepository, ApiKeySnapshot } from "../../domain/ports.js";

export interface KnownApiKeysOptions {
  repository: ApiKeyRepository;
  snapshot: ApiKeySnapshot | null;
  /** How often every key is loaded again; 0: only at start (tests load themselves). */
  reloadIntervalMs: number;
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
}

/** Keys learned one by one (a burst of first lookups) are written to the snapshot once. */
const SNAPSHOT_DELAY_MS = 200;

export class KnownApiKeys {
  private byHash = new Map<string, ApiKeyCredential>();
  /** Key id → when it was revoked, as heard here. */
  private readonly revoked = new Map<string, Date>();
  private timer: NodeJS.Timeout | null = null;
  private pendingSnapshot: NodeJS.Timeout | null = null;

  constructor(private readonly options: KnownApiKeysOptions) {}

  /** Loads every key from the database, or from the snapshot when the database is down (a start without either knows none yet). */
  async start(): Promise<void> {
    try {
      await this.reload();
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      const saved = await this.options.snapshot?.read();
      if (saved) this.replace(saved.items);
      this.options.log.warn(
        { keys: this.byHash.size, savedAt: saved?.savedAt.toISOString() ?? null },
        "the key database is unreachable: API keys known before are accepted (revoked ones refused) until it is back",
      );
    }
    if (this.options.reloadIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.reload().catch((error: unknown) => this.options.log.warn({ err: error }, "reloading the API keys failed; keeping the keys already known"));
      }, this.options.reloadIntervalMs).unref();
    }
  }

  async reload(): Promise<void> {
    this.replace(await this.options.repository.credentials());
    await this.save();
  }

  /** The principal of a known key, null for a revoked one, undefined for a key not known here. */
  find(secretHash: string): Principal | null | undefined {
    const known = this.byHash.get(secretHash);
    if (known === undefined) return undefined;
    return known.revokedAt !== null || this.revoked.has(known.principal.keyId) ? null : known.principal;
  }

  isRevoked(keyId: string): boolean {
    return this.revoked.has(keyId);
  }

  /** A key as a lookup just found it in the database. */
  learn(credential: ApiKeyCredential): void {
    this.noteRevocation(credential);
    this.byHash.set(credential.secretHash, credential);
    this.scheduleSnapshot();
  }

  revoke(keyId: string, at: Date): void {
    this.remember(keyId, at);
    this.scheduleSnapshot();
  }

  /** Stops reloading, and writes a snapshot still waiting to be written. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.pendingSnapshot) {
      clearTimeout(this.pendingSnapshot);
      this.pendingSnapshot = null;
      await this.save();
    }
  }

  private replace(credentials: readonly ApiKeyCredential[]): void {
    for (const credential of credentials) this.noteRevocation(credential);
    this.byHash = new Map(credentials.map((credential) => [credential.secretHash, credential]));
  }

  private noteRevocation({ principal, revokedAt }: ApiKeyCredential): void {
    if (revokedAt !== null) this.remember(principal.keyId, revokedAt);
  }

  /** The first time heard is kept: a key is revoked once. */
  private remember(keyId: string, at: Date): void {
    if (!this.revoked.has(keyId)) this.revoked.set(keyId, at);
  }

  private scheduleSnapshot(): void {
    if (this.options.snapshot === null || this.pendingSnapshot !== null) return;
    this.pendingSnapshot = setTimeout(() => {
      this.pendingSnapshot = null;
      void this.save();
    }, SNAPSHOT_DELAY_MS).unref();
  }

  /** Revocations heard since the last load are written as such. */
  private async save(): Promise<void> {
    const { snapshot, log } = this.options;
    if (snapshot === null) return;
    const keys = [...this.byHash.values()].map((key) => ({ ...key, revokedAt: this.revoked.get(key.principal.keyId) ?? null }));
    await snapshot.write(keys).catch((error: unknown) => log.warn({ err: error }, "could not save the API key snapshot"));
  }
}
