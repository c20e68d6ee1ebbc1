/**
 * Keeps the access list index current on every instance, as RuleSync keeps
 * the rule book: every change heard on the event bus is applied at once
 * (this instance's own changes arrive the same way, before publishing
 * returns), and a full reload from the database runs periodically, the
 * safety net for a message that never arrived. It listens before it loads,
 * so a change made while the first load runs is kept (AccessListIndex.reload).
 *
 * A database that cannot be reached at start does not stop the start: the
 * entries are those of the last-known-good snapshot (last-known-good.ts),
 * or none where there is no snapshot, which the log says, until a reload
 * succeeds.
 */

import type { ListEntry } from "../../domain/access-list.js";
import type { AccessListRepository, AccessListSnapshot, EventBus, Unsubscribe } from "../../domain/ports.js";
import { LastKnownGood } from "../last-known-good.js";
import type { AccessListIndex } from "./access-list-index.js";

export interface AccessListSyncOptions {
  repository: AccessListRepository;
  index: AccessListIndex;
  events: EventBus;
  /** How often every entry is reloaded from the database; 0: never. */
  reloadIntervalMs: number;
  /** Null: none kept (embedded storage, no DATA_DIR). */
  snapshot: AccessListSnapshot | null;
  log: { warn(fields: object, message: string): void };
}

export class AccessListSync {
  private unsubscribe: Unsubscribe | null = null;
  private timer: NodeJS.Timeout | null = null;

  private readonly lastKnown: LastKnownGood<ListEntry>;

  constructor(private readonly options: AccessListSyncOptions) {
    this.lastKnown = new LastKnownGood(options.snapshot, options.log);
  }

  async start(): Promise<void> {
    const { index, events, reloadIntervalMs, log } = this.options;
    this.unsubscribe = events.subscribe("accessListChange", (change) => {
      index.apply(change);
      this.lastKnown.changed(() => index.entries());
    });
    await this.reload().catch(async (error: unknown) => {
      const saved = await this.lastKnown.saved();
      if (saved === null) {
        log.warn({ err: error }, "the access lists could not be loaded: no request is deny- or allow-listed until a reload succeeds");
        return;
      }
      await index.reload(async () => saved.items);
      log.warn(
        { err: error, entries: saved.items.length, savedAt: saved.savedAt.toISOString() },
        "the access lists could not be loaded: enforcing the last-known-good entries from the snapshot until a reload succeeds",
      );
    });
    if (reloadIntervalMs > 0) {
      this.timer = setInterval(() => {
        this.reload().catch((error: unknown) => log.warn({ err: error }, "reloading the access lists failed; keeping the entries already loaded"));
      }, reloadIntervalMs).unref();
    }
  }

  reload(): Promise<void> {
    return this.options.index.reload(this.lastKnown.saving(() => this.options.repository.list()));
  }

  close(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    return this.lastKnown.flush();
  }
}
