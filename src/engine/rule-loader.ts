/**
 * Gets the rules into the rule book and keeps a last-known-good copy on disk.
 *
 * At start it prepares the database (migrations) and loads every rule. If the
 * database cannot be reached and a snapshot exists, the rules come from the
 * snapshot (the service says so, in its log and /readyz) and the loader keeps
 * trying the database in the background until it answers. Without a snapshot
 * a database that cannot be reached stops the start: the service never
 * decides with an empty rule set by accident.
 */

import { UnavailableError } from "../domain/errors.js";
import type { EventBus, RuleRepository, RuleSnapshot, Unsubscribe } from "../domain/ports.js";
import type { RuleBook } from "./rule-book.js";

export type RuleSource = "database" | "snapshot";

export interface RuleLoaderOptions {
  repository: RuleRepository;
  book: RuleBook;
  events: EventBus;
  /** Makes the database ready (migrations); called before each attempt to load from it. */
  prepare: () => Promise<unknown>;
  snapshot: RuleSnapshot | null;
  retryMs: number;
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
}

/** Rule changes are rare; a burst of them (an import) is written to the snapshot once. */
const SNAPSHOT_DELAY_MS = 200;

export class RuleLoader {
  private current: RuleSource | null = null;
  private retry: NodeJS.Timeout | null = null;
  private pendingSnapshot: NodeJS.Timeout | null = null;
  private readonly unsubscribe: Unsubscribe;

  constructor(private readonly options: RuleLoaderOptions) {
    this.unsubscribe = options.events.onRuleChange(() => this.scheduleSnapshot());
  }

  /** Where the rules in the book came from; null before the first load. */
  get source(): RuleSource | null {
    return this.current;
  }

  async start(): Promise<void> {
    try {
      await this.loadFromDatabase();
    } catch (error) {
      if (!(error instanceof UnavailableError) || this.options.snapshot === null) throw error;
      const saved = await this.options.snapshot.read();
      if (saved === null) throw error;
      this.options.book.load(saved.rules);
      this.current = "snapshot";
      this.options.log.warn(
        { rules: saved.rules.length, savedAt: saved.savedAt.toISOString() },
        "the rule database is unreachable: enforcing the last-known-good rules from the snapshot until it is back",
      );
      this.retryInBackground();
    }
  }

  /** Reads every rule from the database into the book, and saves the snapshot. */
  async loadFromDatabase(): Promise<number> {
    await this.options.prepare();
    const { book, repository } = this.options;
    const since = book.mark();
    const rules = await repository.list();
    book.load(rules, since);
    this.current = "database";
    await this.options.snapshot?.write(book.list());
    return rules.length;
  }

  /** Stops retrying and saves a snapshot still waiting to be written. */
  async close(): Promise<void> {
    this.unsubscribe();
    if (this.retry) clearTimeout(this.retry);
    if (this.pendingSnapshot) {
      clearTimeout(this.pendingSnapshot);
      this.pendingSnapshot = null;
      await this.saveSnapshot();
    }
  }

  private retryInBackground(): void {
    this.retry = setTimeout(() => {
      this.loadFromDatabase().then(
        (count) => {
          this.retry = null;
          this.options.log.info({ rules: count }, "the rule database is back: rules reloaded from it");
        },
        () => this.retryInBackground(),
      );
    }, this.options.retryMs);
    this.retry.unref();
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
    await snapshot?.write(book.list()).catch((error: unknown) => log.warn({ err: error }, "could not save the rule snapshot"));
  }
}
