/**
 * The ban service over an in-memory repository and bus: start loads the live
 * bans into the screen, a ban or unban through it reaches the screen at once
 * (through the bus), a ban heard while the live bans are being read survives
 * the load, an unreachable database does not stop the start, and autoBan
 * leaves a value already banned alone.
 */

import { describe, expect, it } from "vitest";
import { BOOTSTRAP } from "../../../src/engine/access/api-key-service.js";
import type { Ban, BanSpec } from "../../../src/domain/ban.js";
import { UnavailableError } from "../../../src/domain/errors.js";
import type { BanRepository } from "../../../src/domain/ports.js";
import { BanScreen } from "../../../src/engine/bans/ban-screen.js";
import { BanService } from "../../../src/engine/bans/ban-service.js";
import { InProcessEventBus } from "../../../src/store/memory/in-process-event-bus.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest } from "../../support/domain-factory.js";

/** Bans in a map, one per tenant, dimension and value, as the table holds them; `onLive` runs while live() reads. */
class MemoryBans implements BanRepository {
  readonly rows = new Map<string, Ban>();
  onLive: () => Promise<void> = async () => {};

  async put(id: string, spec: BanSpec, createdBy: string, createdAt: Date): Promise<Ban> {
    const identity = `${spec.tenantId}\n${spec.dimension}\n${spec.value}`;
    const ban = { ...spec, id: this.rows.get(identity)?.id ?? id, createdBy, createdAt };
    this.rows.set(identity, ban);
    return ban;
  }
  async get(id: string): Promise<Ban | null> {
    return [...this.rows.values()].find((ban) => ban.id === id) ?? null;
  }
  async delete(id: string): Promise<Ban | null> {
    const entry = [...this.rows.entries()].find(([, ban]) => ban.id === id);
    if (entry === undefined) return null;
    this.rows.delete(entry[0]);
    return entry[1];
  }
  async live(tenantId: string | null, now: Date): Promise<Ban[]> {
    const live = [...this.rows.values()].filter((ban) => ban.until > now && (tenantId === null || ban.tenantId === tenantId));
    await this.onLive();
    return live;
  }
}

function setUp() {
  const clock = new ManualClock();
  const repository = new MemoryBans();
  const screen = new BanScreen();
  const events = new InProcessEventBus();
  const service = new BanService({ repository, screen, events, clock, reloadIntervalMs: 0,
      snapshot: null, log: { warn: () => {} } });
  const mallory = makeCheckRequest({ tenantId: "acme", userId: "mallory" });
  const input = { tenantId: "acme", dimension: "USER", value: "mallory", durationSeconds: 60 };
  return { clock, repository, screen, events, service, mallory, input };
}

describe("BanService", () => {
  it("loads the live bans at start, and ended ones not at all", async () => {
    const { clock, repository, screen, service, mallory } = setUp();
    const spec = { tenantId: "acme", dimension: "USER", value: "mallory", until: new Date(clock.now() + 1000), note: null } as const;
    await repository.put("b1", spec, "bootstrap", new Date(clock.now()));
    await repository.put("b2", { ...spec, value: "gone", until: new Date(clock.now() - 1) }, "bootstrap", new Date(clock.now()));
    await service.start();
    expect(screen.screen(mallory, clock.now())?.reason.code).toBe("BANNED");
    expect(screen.find("acme", "USER", "gone", clock.now() - 10)).toBeNull();
    await service.close();
  });

  it("starts while the database is unreachable, and loads the live bans at the next reload", async () => {
    const { clock, repository, screen, service, mallory, input } = setUp();
    await repository.put("b1", { ...input, dimension: "USER", until: new Date(clock.now() + 1000), note: null }, "bootstrap", new Date(clock.now()));
    repository.onLive = async () => {
      throw new UnavailableError("the rule database is unreachable");
    };
    await service.start();
    expect(screen.screen(mallory, clock.now())).toBeNull();
    repository.onLive = async () => {};
    await service.reload();
    expect(screen.screen(mallory, clock.now())?.reason.code).toBe("BANNED");
    await service.close();
  });

  it("puts a ban and its lifting on the screen at once", async () => {
    const { clock, screen, service, mallory, input } = setUp();
    await service.start();
    const ban = await service.ban(BOOTSTRAP, input);
    expect(ban.until.getTime()).toBe(clock.now() + 60_000);
    expect(screen.screen(mallory, clock.now())).not.toBeNull();
    expect(await service.unban(BOOTSTRAP, ban.id)).toBe(true);
    expect(screen.screen(mallory, clock.now())).toBeNull();
    expect(await service.unban(BOOTSTRAP, ban.id)).toBe(false);
    await service.close();
  });

  it("keeps a ban heard while the live bans are being read", async () => {
    const { clock, repository, screen, service, mallory, input } = setUp();
    await service.start();
    repository.onLive = async () => {
      repository.onLive = async () => {};
      await service.ban(BOOTSTRAP, input);
    };
    // The ban is written after live() read the table, so only the event carries it past the load.
    await service.reload();
    expect(screen.screen(mallory, clock.now())?.reason.code).toBe("BANNED");
    await service.close();
  });

  it("autoBan bans once, and leaves a value already banned alone", async () => {
    const { clock, repository, service, input } = setUp();
    await service.start();
    const placed = await service.ban(BOOTSTRAP, { ...input, durationSeconds: 3600 });
    expect(await service.autoBan({ ruleId: "r1", tenantId: "acme", dimension: "USER", value: "mallory", banSeconds: 60 })).toBeNull();
    expect([...repository.rows.values()]).toEqual([placed]);
    const auto = await service.autoBan({ ruleId: "r1", tenantId: "acme", dimension: "USER", value: "eve", banSeconds: 60 });
    expect(auto).toMatchObject({ value: "eve", createdBy: "autoBan:r1", until: new Date(clock.now() + 60_000) });
    await service.close();
  });
});
