/**
 * A last-known-good copy on disk (db/snapshot-file.ts) of what an instance
 * loads from the database and keeps in memory, access list entries and bans,
 * so that one starting while the database is down enforces what was known
 * rather than nothing (the rules have their own, in RuleSync). The copy is
 * written after every load and, a burst of changes at once, SAVE_DELAY_MS
 * after a change heard on the bus.
 */

import type { Snapshot } from "../domain/ports.js";

/** A burst of changes (an import, a flood of automatic bans) is written once. */
const SAVE_DELAY_MS = 200;

export class LastKnownGood<T> {
  private pending: { timer: NodeJS.Timeout; current: () => readonly T[] } | null = null;

  /** `snapshot` null: no copy is kept (embedded storage, or no DATA_DIR). */
  constructor(
    private readonly snapshot: Snapshot<T> | null,
    private readonly log: { warn(fields: object, message: string): void },
  ) {}

  /** `read`, keeping what it returned as the copy; a copy that cannot be written is logged, never a failed load. */
  saving(read: () => Promise<readonly T[]>): () => Promise<readonly T[]> {
    return async () => {
      const items = await read();
      void this.write(items);
      return items;
    };
  }

  /** Something changed: `current` (what is held now) is written shortly, once for a burst. */
  changed(current: () => readonly T[]): void {
    if (this.snapshot === null || this.pending !== null) return;
    const timer = setTimeout(() => {
      this.pending = null;
      void this.write(current());
    }, SAVE_DELAY_MS).unref();
    this.pending = { timer, current };
  }

  /** Writes a change still waiting to be. */
  async flush(): Promise<void> {
    if (this.pending === null) return;
    clearTimeout(this.pending.timer);
    const { current } = this.pending;
    this.pending = null;
    await this.write(current());
  }

  private write(items: readonly T[]): Promise<void> {
    return this.snapshot?.write(items).catch((error: unknown) => this.log.warn({ err: error }, "could not save a last-known-good snapshot")) ?? Promise.resolve();
  }

  /** The copy, or null: none kept, none written yet, one of another database, or unreadable (logged). */
  async saved(): Promise<{ items: T[]; savedAt: Date } | null> {
    if (this.snapshot === null) return null;
    return this.snapshot.read().catch((error: unknown) => {
      this.log.warn({ err: error }, "could not read a last-known-good snapshot");
      return null;
    });
  }
}
