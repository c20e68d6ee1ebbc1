/**
 * The ban screen (domain/screening.ts): every live ban of every tenant, held
 * in memory, so that a banned request is refused without a round trip to
 * Redis or the database. A ban ends by its own `until`, compared with the
 * check's time, so an ended ban refuses nothing even before it is dropped.
 * Only the dimensions a tenant has bans of are looked at: a CLIENT
 * fingerprint (a sha256) is computed only for a tenant with CLIENT bans.
 */

import { BAN_DIMENSIONS, banMessage, banValueOf, isLive, type Ban, type BanDimension } from "../../domain/ban.js";
import type { BanEvent } from "../../domain/events.js";
import type { CheckRequest } from "../../domain/request.js";
import type { RequestScreen, Screening } from "../../domain/screening.js";

export class BanScreen implements RequestScreen {
  /** Per tenant, per dimension: the bans by value. */
  private readonly tenants = new Map<string, Map<BanDimension, Map<string, Ban>>>();

  screen(request: CheckRequest, nowMs: number): Screening | null {
    const dimensions = this.tenants.get(request.tenantId);
    if (dimensions === undefined) return null;
    for (const dimension of BAN_DIMENSIONS) {
      const bans = dimensions.get(dimension);
      if (bans === undefined) continue;
      const value = banValueOf(dimension, request);
      const ban = value === null ? undefined : bans.get(value);
      if (ban !== undefined && isLive(ban, nowMs)) return { admit: false, reason: { code: "BANNED", message: banMessage(ban), until: ban.until } };
    }
    return null;
  }

  /** The live ban of a tenant's value, if any. */
  find(tenantId: string, dimension: BanDimension, value: string, nowMs: number): Ban | null {
    const ban = this.tenants.get(tenantId)?.get(dimension)?.get(value);
    return ban !== undefined && isLive(ban, nowMs) ? ban : null;
  }

  /** Every ban held (some may have ended), for the last-known-good snapshot. */
  bans(): Ban[] {
    return [...this.tenants.values()].flatMap((dimensions) => [...dimensions.values()].flatMap((bans) => [...bans.values()]));
  }

  /** Replaces every ban held with these (the live ones from the database). */
  load(bans: readonly Ban[]): void {
    this.tenants.clear();
    for (const ban of bans) this.add(ban);
  }

  apply(event: Pick<BanEvent, "kind" | "ban">): void {
    if (event.kind === "BANNED") this.add(event.ban);
    else this.remove(event.ban);
  }

  private add(ban: Ban): void {
    let dimensions = this.tenants.get(ban.tenantId);
    if (dimensions === undefined) this.tenants.set(ban.tenantId, (dimensions = new Map()));
    let bans = dimensions.get(ban.dimension);
    if (bans === undefined) dimensions.set(ban.dimension, (bans = new Map()));
    bans.set(ban.value, ban);
  }

  private remove({ tenantId, dimension, value, id }: Ban): void {
    const dimensions = this.tenants.get(tenantId);
    const bans = dimensions?.get(dimension);
    // A replaced ban keeps its id; a lifting of another id (an old message) leaves the ban held alone.
    if (bans?.get(value)?.id !== id) return;
    bans.delete(value);
    if (bans.size === 0) dimensions!.delete(dimension);
    if (dimensions!.size === 0) this.tenants.delete(tenantId);
  }
}
