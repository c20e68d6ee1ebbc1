/**
 * Access list management: authorize (as for rules: readRules to read a
 * tenant's lists, writeRules to change them; the "*" lists are read by every
 * reader and changed by an ADMIN only), validate, write through the
 * repository (which records the change in the tenant's list history in the
 * same transaction), and publish the change on the event bus, from which
 * every instance's index, this one's included, applies it (AccessListSync).
 * An entry the caller may not read does not exist for it (NOT_FOUND). Ids and
 * tenant ids arrive checked (api/args.ts).
 */

import { randomUUID } from "node:crypto";
import { authorize, may, scopeTenant, type Principal } from "../../domain/access.js";
import { validateListEntry, type AccessList, type ListEntry, type ListEntryChange, type ListEntryChangeKind, type ListEntryInput } from "../../domain/access-list.js";
import { NotFoundError } from "../../domain/errors.js";
import type { AccessListRepository, Clock, EventBus } from "../../domain/ports.js";
import { MAX_LIST_ENTRIES_PER_TENANT } from "../../domain/service-limits.js";

export class AccessListService {
  constructor(
    private readonly repository: AccessListRepository,
    private readonly events: EventBus,
    private readonly clock: Clock,
    /** The most entries a tenant may hold (MAX_LIST_ENTRIES_PER_TENANT). */
    readonly maxPerTenant = MAX_LIST_ENTRIES_PER_TENANT,
  ) {}

  async add(principal: Principal, input: ListEntryInput, field = "input"): Promise<ListEntry> {
    if (typeof input.tenantId === "string") authorize(principal, "writeRules", input.tenantId);
    const spec = validateListEntry(input, new Date(this.clock.now()), field);
    authorize(principal, "writeRules", spec.tenantId);
    const entry = await this.repository.add(randomUUID(), spec, principal.keyId, { maxPerTenant: this.maxPerTenant, field: `${field}.tenantId` });
    await this.publish("ADDED", entry, principal);
    return entry;
  }

  async remove(principal: Principal, id: string): Promise<boolean> {
    const existing = await this.repository.get(id);
    if (existing === null || !may(principal, "readRules", existing.tenantId)) throw new NotFoundError("list entry", id);
    authorize(principal, "writeRules", existing.tenantId);
    const removed = await this.repository.remove(id, principal.keyId);
    if (removed === null) throw new NotFoundError("list entry", id);
    await this.publish("REMOVED", removed, principal);
    return true;
  }

  /** A tenant's entries (the caller's own when it names none; every tenant's for an ADMIN naming none), of one list or both. */
  async list(principal: Principal, tenantId: string | null | undefined, list: AccessList | null): Promise<ListEntry[]> {
    const tenant = scopeTenant(principal, "readRules", tenantId);
    if (tenant !== null) return this.repository.listOf(tenant, list);
    const entries = await this.repository.list();
    return list === null ? entries : entries.filter((entry) => entry.list === list);
  }

  /** Every entry of every tenant, for the rules file's import and export (which authorize by the tenants they touch). */
  all(): Promise<ListEntry[]> {
    return this.repository.list();
  }

  /** A tenant's additions and removals, oldest first (the caller's own tenant when it names none). */
  async history(principal: Principal, tenantId: string | null | undefined): Promise<ListEntryChange[]> {
    authorize(principal, "readRules", tenantId ?? principal.tenantId);
    return this.repository.history(tenantId ?? principal.tenantId);
  }

  private async publish(kind: ListEntryChangeKind, entry: ListEntry, principal: Principal): Promise<void> {
    await this.events.publish("accessListChange", { kind, entry, at: new Date(this.clock.now()), actor: principal.keyId });
  }
}
