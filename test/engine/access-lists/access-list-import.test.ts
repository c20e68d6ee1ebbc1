/**
 * A rules file's lists against the per-tenant cap: a file that would take a
 * tenant past it is refused whole (BAD_USER_INPUT on `yaml`), in a dry run
 * too, as one past the rule quota is; nothing is added.
 */

import { describe, expect, it } from "vitest";
import { validateListEntry, type ListEntry } from "../../../src/domain/access-list.js";
import { ValidationError } from "../../../src/domain/errors.js";
import type { AccessListRepository } from "../../../src/domain/ports.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { AccessListService } from "../../../src/engine/access-lists/access-list-service.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { RuleService } from "../../../src/engine/rules/rule-service.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { ManualClock } from "../../support/clock.js";
import { InMemoryRuleRepository } from "../../support/in-memory-rule-repository.js";

describe("importing lists past the per-tenant cap", () => {
  it("refuses the whole file naming yaml, in a dry run too, and adds nothing", async () => {
    const clock = new ManualClock();
    const events = new InProcessEventBus();
    const stored: ListEntry = { ...validateListEntry({ tenantId: "acme", list: "DENY", kind: "USER", value: "u0" }, new Date(0)), id: "e0", createdAt: new Date(0), createdBy: "k1" };
    const added: string[] = [];
    const repository = { list: async () => [stored], add: async (id: string) => void added.push(id) } as unknown as AccessListRepository;
    const lists = new AccessListService(repository, events, clock, 2);
    const rules = new RuleService(new InMemoryRuleRepository(), new RuleBook(), new MemoryCounterStore({ clock, sweepIntervalMs: 0 }), events, clock, undefined, lists);
    const file = "rules: []\nlists:\n  - {tenantId: acme, list: DENY, kind: USER, value: u1}\n  - {tenantId: acme, list: DENY, kind: USER, value: u2}\n";
    for (const dryRun of [true, false]) {
      const refused = await rules.importRules(BOOTSTRAP, file, { dryRun }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ValidationError);
      expect(refused).toMatchObject({ field: "yaml", message: 'yaml would take tenant "acme" to 3 access list entries, more than the 2 a tenant may have' });
    }
    expect(added).toEqual([]);
    const within = await rules.importRules(BOOTSTRAP, "rules: []\nlists:\n  - {tenantId: acme, list: ALLOW, kind: USER, value: u1}\n", { dryRun: true });
    expect(within).toMatchObject({ listEntriesAdded: 1, listEntriesUnchanged: 0, invalid: [] });
  });
});
