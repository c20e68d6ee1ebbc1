/**
 * Authentication by API key against a key repository the test controls (it
 * counts the lookups, and can be made unreachable): the lookup cache is an
 * LRU, concurrent lookups of one key share one query, a revocation heard on
 * the event bus is final, and an unreachable database falls back on what was
 * last known of each key (KnownApiKeys), tried again at most once a second.
 */

import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { BOOTSTRAP, ApiKeyService } from "../../../src/engine/access/api-key-service.js";
import { KnownApiKeys } from "../../../src/engine/access/known-api-keys.js";
import { UnauthenticatedError, UnavailableError } from "../../../src/domain/errors.js";
import type { ApiKey, ApiKeyCredential, ApiKeyRepository, ApiKeySnapshot } from "../../../src/domain/ports.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { ManualClock } from "../../support/clock.js";
import { listenToEvents } from "../../../src/event-listeners.js";

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const SILENT = { info: () => undefined, warn: () => undefined };

/** Keys by secret, every lookup counted by secret hash; `down` makes every call fail as an unreachable database does. */
class CountingKeys implements ApiKeyRepository {
  readonly keys = new Map<string, ApiKey>();
  readonly lookups = new Map<string, number>();
  down = false;

  add(secret: string, fields: Partial<ApiKey> = {}): ApiKey {
    const key: ApiKey = { id: `key-${this.keys.size + 1}`, tenantId: "acme", role: "CHECKER", name: "k", createdAt: new Date(0), revokedAt: null, createdBy: "bootstrap", ...fields };
    this.keys.set(sha256(secret), key);
    return key;
  }

  revokeNow(id: string): void {
    for (const key of this.keys.values()) if (key.id === id) key.revokedAt = new Date(1);
  }

  async findBySecretHash(secretHash: string): Promise<ApiKey | null> {
    this.lookups.set(secretHash, (this.lookups.get(secretHash) ?? 0) + 1);
    this.failIfDown();
    await Promise.resolve();
    return this.keys.get(secretHash) ?? null;
  }

  async credentials(): Promise<ApiKeyCredential[]> {
    this.failIfDown();
    return [...this.keys].map(([secretHash, key]) => ({ secretHash, principal: { keyId: key.id, tenantId: key.tenantId, role: key.role }, revokedAt: key.revokedAt }));
  }

  async create(key: ApiKey, secretHash: string): Promise<ApiKey> {
    this.keys.set(secretHash, key);
    return key;
  }

  async get(id: string): Promise<ApiKey | null> {
    return [...this.keys.values()].find((key) => key.id === id) ?? null;
  }

  async list(): Promise<ApiKey[]> {
    return [...this.keys.values()];
  }

  async revoke(id: string, at: Date): Promise<ApiKey | null> {
    for (const key of this.keys.values()) if (key.id === id) key.revokedAt ??= at;
    return this.get(id);
  }

  lookupsOf(secret: string): number {
    return this.lookups.get(sha256(secret)) ?? 0;
  }

  private failIfDown(): void {
    if (this.down) throw new UnavailableError("the key database is unreachable (test)");
  }
}

/** A snapshot in memory. */
class MemorySnapshot implements ApiKeySnapshot {
  saved: ApiKeyCredential[] | null = null;
  async read() {
    return this.saved === null ? null : { items: this.saved, savedAt: new Date(0) };
  }
  async write(keys: readonly ApiKeyCredential[]) {
    this.saved = [...keys];
  }
}

function setUp({ cacheMs = 60_000, snapshot = null as ApiKeySnapshot | null } = {}) {
  const repository = new CountingKeys();
  const clock = new ManualClock();
  const events = new InProcessEventBus();
  const known = new KnownApiKeys({ repository, snapshot, reloadIntervalMs: 0, log: SILENT });
  const service = new ApiKeyService(repository, { adminToken: "admin-token-of-the-tests", clock, cacheMs, events, known });
  listenToEvents(events, { keys: service });
  return { repository, clock, events, known, service, as: (secret: string, fresh = false) => service.authenticate(`Bearer ${secret}`, { fresh }) };
}

describe("ApiKeyService", () => {
  it("keeps a key in use cached while a flood of unknown tokens passes through its 10,000-entry cache (least recently used first out)", async () => {
    const { repository, as } = setUp();
    repository.add("fg_in-use");
    await as("fg_in-use");
    for (let i = 0; i < 25_000; i++) {
      await expect(as(`fg_unknown-${i}`)).rejects.toBeInstanceOf(UnauthenticatedError);
      if (i % 1000 === 0) await as("fg_in-use");
    }
    expect(repository.lookupsOf("fg_in-use")).toBe(1);
    // The flood itself was looked up once per token, and the oldest of it has been forgotten.
    expect(repository.lookupsOf("fg_unknown-0")).toBe(1);
    await expect(as("fg_unknown-0")).rejects.toBeInstanceOf(UnauthenticatedError);
    expect(repository.lookupsOf("fg_unknown-0")).toBe(2);
  });

  it("looks a key up once for any number of concurrent requests, and again once its cache entry expires or a fresh answer is asked for", async () => {
    const { repository, clock, as } = setUp({ cacheMs: 5000 });
    repository.add("fg_busy");
    const principals = await Promise.all(Array.from({ length: 50 }, () => as("fg_busy")));
    expect(new Set(principals.map((p) => p.keyId))).toEqual(new Set(["key-1"]));
    expect(repository.lookupsOf("fg_busy")).toBe(1);
    clock.advance(4999);
    await as("fg_busy");
    expect(repository.lookupsOf("fg_busy")).toBe(1);
    await as("fg_busy", true);
    expect(repository.lookupsOf("fg_busy")).toBe(2);
    clock.advance(5000);
    await as("fg_busy");
    expect(repository.lookupsOf("fg_busy")).toBe(3);
  });

  it("refuses a key from the moment its revocation arrives on the event bus, though its lookup is still cached", async () => {
    const { repository, events, service, as } = setUp();
    const key = repository.add("fg_soon-revoked");
    const principal = await as("fg_soon-revoked");
    await events.publish("keyRevocation", { keyId: key.id, at: new Date() });
    expect(service.isRevoked(principal)).toBe(true);
    await expect(as("fg_soon-revoked")).rejects.toThrow("the token is not a valid API key (unknown or revoked)");
    expect(repository.lookupsOf("fg_soon-revoked")).toBe(2);
  });

  it("while the database is down, accepts the keys known before, refuses the revoked ones, answers an unknown key UnavailableError with a retry time, and tries the database at most once a second", async () => {
    const { repository, clock, known, as } = setUp({ cacheMs: 100 });
    repository.add("fg_known");
    repository.revokeNow(repository.add("fg_revoked").id);
    await known.start();
    repository.down = true;
    clock.advance(100);

    expect((await as("fg_known")).keyId).toBe("key-1");
    await expect(as("fg_revoked")).rejects.toBeInstanceOf(UnauthenticatedError);
    const unknown = await as("fg_unknown").catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(UnavailableError);
    expect(unknown).toMatchObject({ retryAfter: 1, message: "the key database is unreachable and this API key was not known before it went away: try again shortly" });
    expect(await as("admin-token-of-the-tests")).toBe(BOOTSTRAP);
    const tried = [...repository.lookups.values()].reduce((sum, n) => sum + n, 0);
    expect(tried).toBe(1);

    clock.advance(999);
    await as("fg_known");
    expect([...repository.lookups.values()].reduce((sum, n) => sum + n, 0)).toBe(1);
    clock.advance(1);
    repository.down = false;
    await expect(as("fg_unknown")).rejects.toBeInstanceOf(UnauthenticatedError);
    expect(repository.lookupsOf("fg_unknown")).toBe(1);
  });

  it("starts from the snapshot when the database is down at start, and a revocation heard after a load stands against a later load that read the table before it", async () => {
    const snapshot = new MemorySnapshot();
    const first = setUp({ snapshot });
    const key = first.repository.add("fg_known");
    await first.known.start();
    expect(snapshot.saved?.map((k) => k.secretHash)).toEqual([sha256("fg_known")]);
    expect(JSON.stringify(snapshot.saved)).not.toContain("fg_known");

    first.known.revoke(key.id, new Date(5));
    await first.known.reload();
    expect(first.known.find(sha256("fg_known"))).toBeNull();
    expect(snapshot.saved?.[0]?.revokedAt).toEqual(new Date(5));

    const restarted = setUp({ snapshot });
    restarted.repository.down = true;
    await restarted.known.start();
    expect(restarted.known.find(sha256("fg_known"))).toBeNull();
    expect(restarted.known.find(sha256("fg_other"))).toBeUndefined();
  });
});
