/**
 * Keeps the rule book current on every instance, and a last-known-good copy
 * of it on disk.
 *
 * - Every rule change heard on the event bus is applied to the book (this
 *   instance's own changes arrive the same way, delivered at once).
 * - A full reload from the database runs periodically, the safety net for a
 *   message that never arrived. The book ignores what is not newer than what
 *   it holds, so a late message or a reload that raced with a change never
 *   takes a rule back to an older version. Each period first reads the
 *   repository's change mark (a few counts), and reloads only when it differs
 *   from the one read before the last reload, or when that reload is
 *   FULL_RELOAD_EVERY periods old: an idle instance holding 100,000
 *   overrides spent about 2.2 s of CPU every 30 s reading them all back.
 * - At start, if the database cannot be reached and a snapshot exists, the
 *   rules come from the snapshot (the service says so, in its log and
 *   /readyz) and the database is retried until it answers. Without a
 *   snapshot a database that cannot be reached stops the start: the service
 *   never decides with an empty rule set by accident.
 */

import { UnavailableError } from "../../domain/errors.js";
import type { EventBus, RuleRepository, RuleSnapshot, Unsubscribe } from "../../domain/ports.js";
import type { RuleBook } from "../decision/rule-book.js";

export type RuleSource = "database" | "snapshot";

export interface RuleSyncOptions {
  repository: RuleRepository;
  book: RuleBook;
  events: EventBus;
  /** Makes the database ready (migrations); run before the first load from it. */
  prepare: () => Promise<unknown>;
  snapshot: RuleSnapshot | null;
  /** How often every rule is reloaded from the database; 0: never (tests call reload() themselves). */
  reloadIntervalMs: number;
  /** How often to try the database again after starting from the snapshot. */
  retryMs: number;
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
}

/** Rule changes are rare; a burst of them (an import) is written to the snapshot once. */
const SNAPSHOT_DELAY_MS = 200;

/**
 * Periods after which a reload runs even with the mark unchanged (10 minutes
 * at the default 30 s): expired overrides, which no check applies, leave
 * memory then.
 */
export const FULL_RELOAD_EVERY = 20;

export class RuleSync {
  private current: RuleSource | null = null;
  private prepared = false;
  private unsubscribe: Unsubscribe | null = null;
  private timers: NodeJS.Timeout[] = [];
  private pendingSnapshot: NodeJS.Timeout | null = null;
  /** The change mark read just before the last reload's reads; null before the first. */
  private loadedMark: string | null = null;
  /** Periods since the last reload. */
  private periodsSinceReload = 0;
  /** Whether the last snapshot write failed: a period that does not reload writes it again. */
  private snapshotUnsaved = false;

  constructor(private readonly options: RuleSyncOptions) {}

  /** Where the rules in the book came from; null before the first load. */
  get source(): RuleSource | null {
    return this.current;
  }

  /** Listens first, then loads: a change made while the first load runs is applied, not lost. */
  async start(): Promise<void> {
    this.unsubscribe = this.options.events.subscribe("ruleChange", (change) => {
      if (this.options.book.apply(change)) this.scheduleSnapshot();
    });
    try {
      await this.reload();
    } catch (error) {
      if (!(error instanceof UnavailableError) || this.options.snapshot === null) throw error;
      const saved = await this.options.snapshot.read();
      if (saved === null) throw error;
      this.options.book.load(saved.items);
      this.current = "snapshot";
      this.options.log.warn(
        { rules: saved.items.length, savedAt: saved.savedAt.toISOString() },
        "the rule database is unreachable: enforcing the last-known-good rules from the snapshot until it is back",
      );
      this.retryUntilReachable();
    }
    if (this.options.reloadIntervalMs > 0) {
      const timer = setInterval(() => {
        this.refresh().catch((error: unknown) => this.options.log.warn({ err: error }, "reloading the rules failed; keeping the rules already loaded"));
      }, this.options.reloadIntervalMs);
      this.timers.push(timer.unref());
    }
  }

  /** Replaces the book's rules with the database's, keeping whatever changes arrived while they were read, and saves the snapshot. */
  async reload(): Promise<number> {
    if (!this.prepared) {
      await this.options.prepare();
      this.prepared = true;
    }
    const { book, repository } = this.options;
    const since = book.mark();
    // Read first: a write landing between the mark and the lists is in the lists, and makes the next period reload
    // again; a mark read after them could hold a write the lists missed, and no period would reload for it.
    const mark = await repository.changeMark();
    const [rules, overrides] = await Promise.all([repository.list(), repository.listOverrides()]);
    book.load(rules, since, overrides);
    this.loadedMark = mark;
    this.periodsSinceReload = 0;
    this.current = "database";
    await this.saveSnapshot();
    return rules.length;
  }

  /**
   * One period of the safety net: a reload when the repository's change mark
   * differs from the last reload's, or when FULL_RELOAD_EVERY periods have
   * passed since it; else nothing more than the mark is read. Returns whether
   * it reloaded.
   */
  async refresh(): Promise<boolean> {
    this.periodsSinceReload++;
    if (this.loadedMark !== null && this.periodsSinceReload < FULL_RELOAD_EVERY && (await this.options.repository.changeMark()) === this.loadedMark) {
      // The load age (Health.rules.loadedAt, floodgate_rules_load_age_seconds) tells how current the rules are known to be.
      this.options.book.markCurrent();
      // A reload wrote the snapshot every period: one that failed (a full disk) is not left failed until the next reload.
      if (this.snapshotUnsaved) await this.saveSnapshot();
      return false;
    }
    await this.reload();
    return true;
  }

  /** Stops listening and reloading, and saves a snapshot still waiting to be written. */
  async close(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (const timer of this.timers.splice(0)) clearTimeout(timer);
    if (this.pendingSnapshot) {
      clearTimeout(this.pendingSnapshot);
      this.pendingSnapshot = null;
      await this.saveSnapshot();
    }
  }

  private retryUntilReachable(): void {
    const timer = setTimeout(() => {
      this.reload().then(
        (count) => this.options.log.info({ rules: count }, "the rule database is back: rules reloaded from it"),
        () => this.retryUntilReachable(),
      );
    }, this.options.retryMs);
    this.timers.push(timer.unref());
  }

  private scheduleSnapshot(): void {
    if (this.options.snapshot === null || this.pendingSnapshot !== null) return;
    this.pendingSnapshot = setTimeout(() => {
      this.pendingSnapshot = null;
      void this.saveSnapshot();
    }, SNAPSHOT_DELAY_MS);
    this.pendingSnapshot.unref();
  }

  private async saveSnapshot(): Promise<void> {
    const { snapshot, book, log } = this.options;
    if (snapshot === null) return;
    try {
      await snapshot.write(book.list());
      this.snapshotUnsaved = false;
    } catch (error) {
      this.snapshotUnsaved = true;
      log.warn({ err: error }, "could not save the rule snapshot");
    }
  }
}
