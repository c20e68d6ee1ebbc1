/**
 * Every access list entry this instance knows, filed so that screening a
 * request costs no round trip and about the same with ten entries or ten
 * thousand (domain/access-list.ts says what an entry is):
 *   - users and API keys in maps;
 *   - IP blocks by family and prefix length, one map per length in use: a
 *     lookup masks the address once per length (at most 33 or 129, in
 *     practice a handful), as override-index.ts does for overrides;
 *   - user-agent globs without "*" in a map, the others tested one by one
 *     (lower-cased, with override-index.ts's globMatches: linear in the user
 *     agent's length per glob).
 *
 * An expired entry is skipped where it is met (a shorter live block under an
 * expired one still answers), and left out of the next load from the
 * database: no timer is needed for an expiry to take effect on time.
 *
 * The index gives the limiter two screens: `deny` (refuses with
 * DENY_LISTED) and `allow` (admits with ALLOW_LISTED); between them the
 * composition root puts the bans. Each looks at the request's tenant's list
 * and at the "*" list.
 */

import { ALL_TENANTS } from "../../domain/rule.js";
import { apiKeyEntryValue, describeEntry, isLive, listEntryIdentity, type AccessList, type ListEntry, type ListEntryChange } from "../../domain/access-list.js";
import { ipBits, networkOf } from "../../domain/override.js";
import type { CheckRequest } from "../../domain/request.js";
import type { RequestScreen, Screening } from "../../domain/screening.js";
import { globMatches } from "../decision/override-index.js";

/** IP blocks by prefix length: "v4:00001010" under 8 is 10.0.0.0/8. */
class BlockTable {
  private readonly byLength = new Map<number, Map<string, ListEntry>>();
  /** Longest first: the most specific block answers. */
  private lengths: number[] = [];

  add(entry: ListEntry): void {
    const [bits, length] = blockOf(entry.value);
    let filed = this.byLength.get(length);
    if (filed === undefined) {
      this.byLength.set(length, (filed = new Map()));
      this.lengths = [...this.byLength.keys()].sort((a, b) => b - a);
    }
    filed.set(networkOf(bits, length), entry);
  }

  remove(entry: ListEntry): void {
    const [bits, length] = blockOf(entry.value);
    const filed = this.byLength.get(length);
    if (filed === undefined) return;
    filed.delete(networkOf(bits, length));
    if (filed.size === 0) {
      this.byLength.delete(length);
      this.lengths = [...this.byLength.keys()].sort((a, b) => b - a);
    }
  }

  find(address: string, nowMs: number): ListEntry | null {
    if (this.lengths.length === 0) return null;
    const bits = ipBits(address);
    for (const length of this.lengths) {
      if (length > bits.length) continue;
      const entry = this.byLength.get(length)!.get(networkOf(bits, length));
      if (entry !== undefined && isLive(entry, nowMs)) return entry;
    }
    return null;
  }
}

/** An address ("10.1.2.3", a /32) or a block ("10.0.0.0/8") as its bits and prefix length. */
function blockOf(value: string): [string, number] {
  const slash = value.lastIndexOf("/");
  const bits = ipBits(slash === -1 ? value : value.slice(0, slash));
  return [bits, slash === -1 ? bits.length : Number(value.slice(slash + 1))];
}

/** One list (DENY or ALLOW) of one tenant. */
class TenantList {
  private readonly ips = new BlockTable();
  private readonly users = new Map<string, ListEntry>();
  private readonly apiKeys = new Map<string, ListEntry>();
  private readonly exactAgents = new Map<string, ListEntry>();
  private readonly agentGlobs = new Map<string, { parts: string[]; entry: ListEntry }>();
  size = 0;

  add(entry: ListEntry): void {
    this.size++;
    switch (entry.kind) {
      case "IP":
        return this.ips.add(entry);
      case "USER":
        return void this.users.set(entry.value, entry);
      case "API_KEY":
        return void this.apiKeys.set(entry.value, entry);
      case "USER_AGENT":
        if (entry.value.includes("*")) this.agentGlobs.set(entry.value, { parts: entry.value.split("*"), entry });
        else this.exactAgents.set(entry.value, entry);
    }
  }

  remove(entry: ListEntry): void {
    this.size--;
    switch (entry.kind) {
      case "IP":
        return this.ips.remove(entry);
      case "USER":
        return void this.users.delete(entry.value);
      case "API_KEY":
        return void this.apiKeys.delete(entry.value);
      case "USER_AGENT":
        this.agentGlobs.delete(entry.value);
        this.exactAgents.delete(entry.value);
    }
  }

  find(request: CheckRequest, nowMs: number): ListEntry | null {
    const live = (entry: ListEntry | undefined) => (entry !== undefined && isLive(entry, nowMs) ? entry : null);
    if (request.ip !== null) {
      const entry = this.ips.find(request.ip, nowMs);
      if (entry !== null) return entry;
    }
    if (request.userId !== null) {
      const entry = live(this.users.get(request.userId));
      if (entry !== null) return entry;
    }
    if (request.apiKey !== null && this.apiKeys.size > 0) {
      const entry = live(this.apiKeys.get(apiKeyEntryValue(request.apiKey)));
      if (entry !== null) return entry;
    }
    if (request.userAgent !== null && (this.exactAgents.size > 0 || this.agentGlobs.size > 0)) {
      const agent = request.userAgent.toLowerCase();
      const exact = live(this.exactAgents.get(agent));
      if (exact !== null) return exact;
      for (const { parts, entry } of this.agentGlobs.values()) if (isLive(entry, nowMs) && globMatches(parts, agent)) return entry;
    }
    return null;
  }
}

export class AccessListIndex {
  private readonly byId = new Map<string, ListEntry>();
  /** Tenant, list, kind and value to the id of the entry that holds them. */
  private readonly byIdentity = new Map<string, string>();
  private readonly lists = new Map<string, TenantList>();
  /** Changes heard while a reload reads, replayed over what it read. */
  private heard: ListEntryChange[] = [];
  private reading = 0;

  readonly deny: RequestScreen = { screen: (request, nowMs) => this.screen("DENY", request, nowMs) };
  readonly allow: RequestScreen = { screen: (request, nowMs) => this.screen("ALLOW", request, nowMs) };

  get size(): number {
    return this.byId.size;
  }

  /** Every entry held, for the last-known-good snapshot. */
  entries(): ListEntry[] {
    return [...this.byId.values()];
  }

  /**
   * Replaces every entry with what `read` returns, then applies again the
   * changes heard while it read: a change is never undone by a load that
   * read the database before it. A read that fails leaves the entries as they were.
   */
  async reload(read: () => Promise<readonly ListEntry[]>): Promise<void> {
    this.reading++;
    try {
      const entries = await read();
      this.byId.clear();
      this.byIdentity.clear();
      this.lists.clear();
      for (const entry of entries) this.add(entry);
      for (const change of this.heard) this.applyOnly(change);
    } finally {
      if (--this.reading === 0) this.heard = [];
    }
  }

  /** An entry added or removed, on any instance. */
  apply(change: ListEntryChange): void {
    if (this.reading > 0) this.heard.push(change);
    this.applyOnly(change);
  }

  private applyOnly({ kind, entry }: ListEntryChange): void {
    if (kind === "ADDED") this.add(entry);
    else this.remove(entry.id);
  }

  /** Adds the entry, replacing one of the same identifier (an expired entry the database replaced). */
  private add(entry: ListEntry): void {
    if (this.byId.has(entry.id)) return;
    const replaced = this.byIdentity.get(listEntryIdentity(entry));
    if (replaced !== undefined) this.remove(replaced);
    this.byId.set(entry.id, entry);
    this.byIdentity.set(listEntryIdentity(entry), entry.id);
    const name = listName(entry.tenantId, entry.list);
    let list = this.lists.get(name);
    if (list === undefined) this.lists.set(name, (list = new TenantList()));
    list.add(entry);
  }

  private remove(id: string): void {
    const entry = this.byId.get(id);
    if (entry === undefined) return;
    this.byId.delete(id);
    this.byIdentity.delete(listEntryIdentity(entry));
    const name = listName(entry.tenantId, entry.list);
    const list = this.lists.get(name)!;
    list.remove(entry);
    if (list.size === 0) this.lists.delete(name);
  }

  private screen(list: AccessList, request: CheckRequest, nowMs: number): Screening | null {
    if (this.byId.size === 0) return null;
    const entry =
      this.lists.get(listName(request.tenantId, list))?.find(request, nowMs) ?? this.lists.get(listName(ALL_TENANTS, list))?.find(request, nowMs) ?? null;
    if (entry === null) return null;
    return { admit: list === "ALLOW", reason: { code: list === "ALLOW" ? "ALLOW_LISTED" : "DENY_LISTED", message: describeEntry(entry), until: entry.expiresAt } };
  }
}

/** Tenant ids hold no control characters, so the two cannot run into each other. */
function listName(tenantId: string, list: AccessList): string {
  return `${list}\n${tenantId}`;
}
