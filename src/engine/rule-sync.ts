/**
 * Keeps the rule book current on every instance: each rule change heard on the
 * event bus is applied to the book (this instance's own changes arrive the
 * same way, delivered at once), and a full reload from the repository runs
 * periodically as the safety net for a message that never arrived. The book
 * ignores what is not newer than what it holds, so a late message or a reload
 * that raced with a change never takes a rule back to an older version.
 */

import type { EventBus, RuleRepository, Unsubscribe } from "../domain/ports.js";
import type { RuleBook } from "./rule-book.js";

export interface RuleSyncOptions {
  /** How often the full reload runs; 0 never (tests call reload() themselves). */
  reloadIntervalMs: number;
  /** A periodic reload that failed; the book keeps what it has and the next one tries again. */
  onReloadError: (error: unknown) => void;
}

export class RuleSync {
  private unsubscribe: Unsubscribe | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly book: RuleBook,
    private readonly repository: RuleRepository,
    private readonly events: EventBus,
    private readonly options: RuleSyncOptions,
  ) {}

  /** Listens first, then loads: a change made while the first load runs is applied, not lost. Returns how many rules were loaded. */
  async start(): Promise<number> {
    this.unsubscribe = this.events.onRuleChange((change) => this.book.apply(change));
    const loaded = await this.reload();
    if (this.options.reloadIntervalMs > 0) {
      this.timer = setInterval(() => this.reload().catch(this.options.onReloadError), this.options.reloadIntervalMs).unref();
    }
    return loaded;
  }

  /** Replaces the book's rules with the repository's, keeping whatever changes arrived while they were being read. */
  async reload(): Promise<number> {
    const since = this.book.mark();
    const rules = await this.repository.list();
    this.book.load(rules, since);
    return rules.length;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.unsubscribe?.();
    this.timer = null;
    this.unsubscribe = null;
  }
}
