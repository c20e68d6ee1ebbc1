/**
 * AccessListSync: an instance loads every entry at start, applies the
 * changes it hears, and starts with empty lists (saying so) when the
 * database cannot be read.
 */

import { describe, expect, it } from "vitest";
import { validateListEntry, type ListEntry } from "../../../src/domain/access-list.js";
import { UnavailableError } from "../../../src/domain/errors.js";
import type { AccessListRepository } from "../../../src/domain/ports.js";
import { parseCheckRequest } from "../../../src/domain/request.js";
import { AccessListIndex } from "../../../src/engine/access-lists/access-list-index.js";
import { AccessListSync } from "../../../src/engine/access-lists/access-list-sync.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";

const stored: ListEntry = { ...validateListEntry({ tenantId: "acme", list: "DENY", kind: "USER", value: "mallory" }, new Date(0)), id: "e1", createdAt: new Date(0), createdBy: "k1" };
const later: ListEntry = { ...stored, id: "e2", value: "trudy" };

function repositoryOf(list: () => Promise<ListEntry[]>): AccessListRepository {
  return { list } as AccessListRepository;
}

describe("AccessListSync", () => {
  const refuses = (index: AccessListIndex, userId: string) => index.deny.screen(parseCheckRequest({ tenantId: "acme", userId }), 0) !== null;

  it("loads every entry at start and applies what it hears", async () => {
    const index = new AccessListIndex();
    const events = new InProcessEventBus();
    const warnings: string[] = [];
    const sync = new AccessListSync({ repository: repositoryOf(async () => [stored]), index, events, reloadIntervalMs: 0,
      snapshot: null, log: { warn: (_, message) => warnings.push(message) } });
    await sync.start();
    expect(refuses(index, "mallory")).toBe(true);
    await events.publish("accessListChange", { kind: "ADDED", entry: later, at: new Date(), actor: "k1" });
    await events.publish("accessListChange", { kind: "REMOVED", entry: stored, at: new Date(), actor: "k1" });
    expect([refuses(index, "mallory"), refuses(index, "trudy")]).toEqual([false, true]);
    expect(warnings).toEqual([]);
    await sync.close();
  });

  it("starts with empty lists, and says so, when the database cannot be read", async () => {
    const index = new AccessListIndex();
    const warnings: string[] = [];
    const sync = new AccessListSync({
      repository: repositoryOf(() => Promise.reject(new UnavailableError("down"))),
      index,
      events: new InProcessEventBus(),
      reloadIntervalMs: 0,
      snapshot: null,
      log: { warn: (_, message) => warnings.push(message) },
    });
    await sync.start();
    expect(index.size).toBe(0);
    expect(warnings).toEqual(["the access lists could not be loaded: no request is deny- or allow-listed until a reload succeeds"]);
    await sync.close();
  });
});
