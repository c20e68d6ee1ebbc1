/**
 * RuleSync keeps a rule book current from the event bus and from full
 * reloads, and never lets either take a rule back to an older version. Two
 * "instances" here are two books on one in-process bus over one repository.
 */

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RuleChange } from "../../../src/domain/events.js";
import { systemClock, type RuleSnapshot } from "../../../src/domain/ports.js";
import type { Rule } from "../../../src/domain/rule.js";
import { specOf } from "../../../src/domain/rule-validation.js";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import { RuleBook } from "../../../src/engine/decision/rule-book.js";
import { RuleService } from "../../../src/engine/rules/rule-service.js";
import { FULL_RELOAD_EVERY, RuleSync } from "../../../src/engine/rules/rule-sync.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "../../../src/store/memory/memory-counter-store.js";
import { makeRule } from "../../support/domain-factory.js";
import { InMemoryRuleRepository } from "../../support/in-memory-rule-repository.js";
import { inProcessRuleSync } from "../../support/rule-sync.js";

const SPEC = specOf(makeRule({ tenantId: "acme", name: "per-user", scope: ["USER"] }));

function change(kind: RuleChange["kind"], rule: Rule, version = rule.version): RuleChange {
  return { kind, ruleId: rule.id, tenantId: rule.tenantId, version, rule: kind === "DELETED" ? null : rule, at: new Date() };
}

describe("RuleSync", () => {
  let repository: InMemoryRuleRepository;
  let events: InProcessEventBus;
  let book: RuleBook;
  let sync: RuleSync;

  beforeEach(async () => {
    repository = new InMemoryRuleRepository();
    events = new InProcessEventBus();
    book = new RuleBook();
    sync = inProcessRuleSync(book, repository, events);
  });

  afterEach(async () => {
    await sync.close();
    await events.close();
  });

  it("loads the repository's rules on start", async () => {
    const rule = await repository.create("r1", SPEC);
    await sync.start();
    expect(book.size).toBe(1);
    expect(book.get("r1")).toEqual(rule);
  });

  it("applies the changes it hears: created, updated, deleted", async () => {
    await sync.start();
    const created = await repository.create("r1", SPEC);
    await events.publish("ruleChange", change("CREATED", created));
    expect(book.get("r1")).toEqual(created);
    const updated = (await repository.update("r1", { ...SPEC, limit: 7 }, 1))!;
    await events.publish("ruleChange", change("UPDATED", updated));
    expect(book.get("r1")?.limit).toBe(7);
    await events.publish("ruleChange", change("DELETED", updated, 3));
    expect(book.get("r1")).toBeNull();
  });

  it("picks up at the next reload a change whose message never arrived", async () => {
    await sync.start();
    await repository.create("r1", SPEC);
    expect(book.get("r1")).toBeNull();
    await sync.reload();
    expect(book.get("r1")?.limit).toBe(5);
  });

  describe("each period of the safety net", () => {
    it("reads only the change mark while nothing is written, and reloads once something is", async () => {
      await repository.create("r1", SPEC);
      await sync.start();
      const lists = vi.spyOn(repository, "list");
      expect(await sync.refresh()).toBe(false);
      expect(await sync.refresh()).toBe(false);
      expect(lists).not.toHaveBeenCalled();
      await repository.update("r1", { ...SPEC, limit: 7 }, 1);
      expect(await sync.refresh()).toBe(true);
      expect(lists).toHaveBeenCalledTimes(1);
      expect(book.get("r1")?.limit).toBe(7);
      expect(await sync.refresh()).toBe(false);
    });

    it("drops a rule created and deleted between two periods whose deletion message never arrived", async () => {
      await sync.start();
      const created = await repository.create("r1", SPEC);
      await events.publish("ruleChange", change("CREATED", created));
      await repository.delete("r1");
      expect(book.get("r1")).not.toBeNull();
      expect(await sync.refresh()).toBe(true);
      expect(book.get("r1")).toBeNull();
    });

    it("picks up a rule created, an override set and one deleted whose messages never arrived", async () => {
      await sync.start();
      await repository.create("r1", SPEC);
      expect(await sync.refresh()).toBe(true);
      expect(book.get("r1")).not.toBeNull();
      const override = { ruleId: "r1", dimension: "USER", attributeKey: null, match: "EXACT", identifier: "alice", limit: 50, burst: null, window: 1, windowUnit: "MINUTES", expiresAt: null, note: null } as const;
      await repository.setOverride("o1", override);
      expect(await sync.refresh()).toBe(true);
      expect(book.get("r1")?.version).toBe(2);
      await repository.deleteOverride("o1");
      expect(await sync.refresh()).toBe(true);
      expect(book.get("r1")?.version).toBe(3);
    });

    it("moves the load age when it finds nothing written: the rules are known current as of then", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        vi.setSystemTime(new Date("2026-12-06T12:00:00Z"));
        await sync.start();
        vi.setSystemTime(new Date("2026-12-06T12:00:30Z"));
        expect(await sync.refresh()).toBe(false);
        expect(book.lastLoadedAt).toEqual(new Date("2026-12-06T12:00:30Z"));
      } finally {
        vi.useRealTimers();
      }
    });

    it("writes again a snapshot whose write failed, without a reload", async () => {
      const written: Rule[][] = [];
      let failing = true;
      const snapshot: RuleSnapshot = {
        read: async () => null,
        write: async (items) => {
          if (failing) throw new Error("ENOSPC: no space left on device");
          written.push([...items]);
        },
      };
      const withSnapshot = new RuleSync({ repository, book, events, prepare: async () => undefined, snapshot, reloadIntervalMs: 0, retryMs: 1000, log: { info: () => undefined, warn: () => undefined } });
      await repository.create("r1", SPEC);
      await withSnapshot.start();
      expect(written).toEqual([]);
      failing = false;
      expect(await withSnapshot.refresh()).toBe(false);
      expect(written.map((rules) => rules.map((rule) => rule.id))).toEqual([["r1"]]);
      expect(await withSnapshot.refresh()).toBe(false);
      expect(written).toHaveLength(1);
      await withSnapshot.close();
    });

    it("reloads in full every FULL_RELOAD_EVERY periods however still the mark", async () => {
      await sync.start();
      const lists = vi.spyOn(repository, "list");
      for (let period = 1; period < FULL_RELOAD_EVERY; period++) expect(await sync.refresh()).toBe(false);
      expect(await sync.refresh()).toBe(true);
      expect(lists).toHaveBeenCalledTimes(1);
      expect(await sync.refresh()).toBe(false);
    });

    it("reloads when a write lands between the mark and the lists it is read before", async () => {
      await sync.start();
      const list = repository.list.bind(repository);
      let writeDuringReload = true;
      vi.spyOn(repository, "list").mockImplementation(async () => {
        if (writeDuringReload) {
          writeDuringReload = false;
          await repository.create("r2", { ...SPEC, name: "late" });
        }
        return list();
      });
      await repository.create("r1", SPEC);
      expect(await sync.refresh()).toBe(true);
      // The write made during the reload is in the book, and the mark read before it makes the next period reload again.
      expect(book.get("r2")).not.toBeNull();
      expect(await sync.refresh()).toBe(true);
      expect(await sync.refresh()).toBe(false);
    });
  });

  it("never goes back to an older version: not for a late message, not for a reload that read before a change", async () => {
    await sync.start();
    const v1 = await repository.create("r1", SPEC);
    const v2 = (await repository.update("r1", { ...SPEC, limit: 7 }, 1))!;
    await events.publish("ruleChange", change("UPDATED", v2));
    await events.publish("ruleChange", change("CREATED", v1));
    expect(book.get("r1")?.version).toBe(2);

    // A reload whose snapshot was read before v3 arrived keeps v3.
    const since = book.mark();
    const snapshot = await repository.list();
    const v3 = (await repository.update("r1", { ...SPEC, limit: 9 }, 2))!;
    await events.publish("ruleChange", change("UPDATED", v3));
    book.load(snapshot, since);
    expect(book.get("r1")?.limit).toBe(9);
  });

  it("stops listening once closed", async () => {
    await sync.start();
    sync.close();
    await events.publish("ruleChange", change("CREATED", await repository.create("r1", SPEC)));
    expect(book.get("r1")).toBeNull();
  });

  it("makes a RuleService's changes visible in every book on the bus before the mutation returns", async () => {
    const otherBook = new RuleBook();
    const other = inProcessRuleSync(otherBook, repository, events);
    await sync.start();
    await other.start();
    const service = new RuleService(repository, book, new MemoryCounterStore({ sweepIntervalMs: 0 }), events, systemClock);
    const rule = await service.create(BOOTSTRAP, SPEC);
    expect(book.get(rule.id)).toEqual(rule);
    expect(otherBook.get(rule.id)).toEqual(rule);
    await service.delete(BOOTSTRAP, rule.id);
    expect(otherBook.get(rule.id)).toBeNull();
    await other.close();
  });
});
