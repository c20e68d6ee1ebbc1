/** The RuleSync of the tests that run the engine in one process. */

import type { EventBus, RuleRepository } from "../../src/domain/ports.js";
import type { RuleBook } from "../../src/engine/decision/rule-book.js";
import { RuleSync } from "../../src/engine/rules/rule-sync.js";

/**
 * Keeps `book` current from `events` and `repository` the way the service does,
 * minus what a test does not want: no migrations to prepare, no snapshot file,
 * no periodic reload (a test calls reload() itself) and no log lines.
 */
export function inProcessRuleSync(book: RuleBook, repository: RuleRepository, events: EventBus): RuleSync {
  return new RuleSync({
    repository,
    book,
    events,
    prepare: async () => undefined,
    snapshot: null,
    reloadIntervalMs: 0,
    retryMs: 1000,
    log: { info: () => undefined, warn: () => undefined },
  });
}
