/**
 * Bans: authorize, validate, store (BanRepository) and publish on the event
 * bus, from which every instance's ban screen, this one's included, takes the
 * change (the bus delivers this instance's own events before publishing
 * resolves, so its very next check is screened by the new ban). On start the
 * live bans are loaded, and again every `reloadIntervalMs`: the safety net for
 * a ban message an instance never heard, and what drops ended bans from memory.
 * A database that cannot be reached at start does not stop it (the rules may
 * come from their snapshot): the instance screens with the live bans of the
 * last-known-good snapshot (last-known-good.ts), where there is one, and those
 * it hears of, until a reload reaches the database.
 *
 * Bans are changed with the rights rules are (writeRules) and read with
 * readRules. Lifting a ban is idempotent: lifting one that is gone, ended, or
 * another tenant's answers false and changes nothing, so another tenant's ids
 * reveal nothing.
 */

import { randomUUID } from "node:crypto";
import { authorize, holds, may, scopeTenant, type Principal } from "../../domain/access.js";
import { parseBanInput, type Ban, type BanDimension, type BanInput } from "../../domain/ban.js";
import { ForbiddenError, UnavailableError } from "../../domain/errors.js";
import type { BanEventKind } from "../../domain/events.js";
import type { BanRepository, BanSnapshot, Clock, EventBus, Unsubscribe } from "../../domain/ports.js";
import { LENGTHS } from "../../domain/service-limits.js";
import { reference } from "../../domain/validation.js";
import { LastKnownGood } from "../last-known-good.js";
import type { BanScreen } from "./ban-screen.js";

export interface BanServiceOptions {
  repository: BanRepository;
  screen: BanScreen;
  events: EventBus;
  clock: Clock;
  /** How often the live bans are reloaded from the database; 0: never (tests). */
  reloadIntervalMs: number;
  /** Null: none kept (embedded storage, no DATA_DIR). */
  snapshot: BanSnapshot | null;
  log: { warn(fields: object, message: string): void };
}

/** What an automatic ban is placed for: a rule's bucket refused K times within its autoBan period. */
export interface AutoBanRequest {
  ruleId: string;
  tenantId: string;
  dimension: BanDimension;
  value: string;
  banSeconds: number;
}

export class BanService {
  private unsubscribe: Unsubscribe | null = null;
  private timer: NodeJS.Timeout | null = null;

  private readonly lastKnown: LastKnownGood<Ban>;

  constructor(private readonly options: BanServiceOptions) {
    this.lastKnown = new LastKnownGood(options.snapshot, options.log);
  }

  /** Listens first, then loads: a ban published while the live bans are read is applied after them, not lost. */
  async start(): Promise<void> {
    this.unsubscribe = this.options.events.subscribe("ban", (event) => {
      this.options.screen.apply(event);
      this.lastKnown.changed(() => this.options.screen.bans());
    });
    await this.reload().catch(async (error: unknown) => {
      if (!(error instanceof UnavailableError)) throw error;
      const saved = await this.lastKnown.saved();
      if (saved === null) {
        this.options.log.warn({ err: error }, "the database is unreachable: no ban is enforced but those heard of until a reload reaches it");
        return;
      }
      for (const ban of saved.items) this.options.screen.apply({ kind: "BANNED", ban });
      this.options.log.warn(
        { err: error, bans: saved.items.length, savedAt: saved.savedAt.toISOString() },
        "the database is unreachable: enforcing the live bans of the last-known-good snapshot, and those heard of, until a reload reaches it",
      );
    });
    if (this.options.reloadIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.reload().catch((error: unknown) => this.options.log.warn({ err: error }, "reloading the bans failed; keeping the bans already loaded"));
      }, this.options.reloadIntervalMs).unref();
    }
  }

  /** Replaces the screen's bans with the database's live ones, then applies what was heard meanwhile. */
  async reload(): Promise<void> {
    const { events, repository, screen, clock } = this.options;
    const heard: Parameters<BanScreen["apply"]>[0][] = [];
    const stopHearing = events.subscribe("ban", (event) => heard.push(event));
    try {
      screen.load(await this.lastKnown.saving(() => repository.live(null, new Date(clock.now())))());
    } finally {
      stopHearing();
    }
    for (const event of heard) screen.apply(event);
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.lastKnown.flush();
  }

  async ban(principal: Principal, input: BanInput): Promise<Ban> {
    if (typeof input.tenantId === "string") authorize(principal, "writeRules", input.tenantId);
    const now = this.options.clock.now();
    const spec = parseBanInput(input, now);
    authorize(principal, "writeRules", spec.tenantId);
    const ban = await this.options.repository.put(randomUUID(), spec, principal.keyId, new Date(now));
    await this.publish("BANNED", ban, null);
    return ban;
  }

  /** True when a live ban was lifted; false when there was none the caller may lift (already lifted, ended, unknown, another tenant's). */
  async unban(principal: Principal, id: string): Promise<boolean> {
    if (!holds(principal, "writeRules")) throw new ForbiddenError(`this API key's role ${principal.role} does not allow writeRules`);
    const existing = await this.options.repository.get(reference(id, "id", LENGTHS.id));
    if (existing === null || !may(principal, "writeRules", existing.tenantId)) return false;
    const lifted = await this.options.repository.delete(id);
    if (lifted === null) return false;
    await this.publish("UNBANNED", lifted, null);
    return lifted.until.getTime() > this.options.clock.now();
  }

  /** The live bans of a tenant (the caller's own when none is named; every tenant's for an ADMIN naming none). */
  bans(principal: Principal, tenantId?: string | null): Promise<Ban[]> {
    return this.options.repository.live(scopeTenant(principal, "readRules", tenantId), new Date(this.options.clock.now()));
  }

  /**
   * Bans a bucket's identity for a rule's autoBan; a value already banned is
   * left as it is (its ban may be longer, or placed by hand). The caller
   * makes sure one instance asks, once per period (AutoBanner).
   */
  async autoBan({ ruleId, tenantId, dimension, value, banSeconds }: AutoBanRequest): Promise<Ban | null> {
    const now = this.options.clock.now();
    if (this.options.screen.find(tenantId, dimension, value, now) !== null) return null;
    const spec = { tenantId, dimension, value, until: new Date(now + banSeconds * 1000), note: `refused too often by rule ${ruleId}` };
    const ban = await this.options.repository.put(randomUUID(), spec, `autoBan:${ruleId}`, new Date(now));
    await this.publish("BANNED", ban, ruleId);
    return ban;
  }

  private publish(kind: BanEventKind, ban: Ban, ruleId: string | null): Promise<void> {
    return this.options.events.publish("ban", { kind, tenantId: ban.tenantId, ruleId, ban, at: new Date(this.options.clock.now()) });
  }
}
