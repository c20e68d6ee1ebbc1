/**
 * The ban screen on a pinned clock: a ban refuses its tenant's requests
 * carrying its value until the millisecond it ends, and nothing after; other
 * tenants and other values are not its business; a lifting of an older id
 * leaves a replaced ban alone.
 */

import { describe, expect, it } from "vitest";
import type { Ban } from "../../../src/domain/ban.js";
import { clientFingerprint } from "../../../src/domain/bucket-key.js";
import { BanScreen } from "../../../src/engine/bans/ban-screen.js";
import { ManualClock } from "../../support/clock.js";
import { makeCheckRequest } from "../../support/domain-factory.js";

const clock = new ManualClock();
const banOf = (fields: Partial<Ban> = {}): Ban => ({
  id: "b1",
  tenantId: "acme",
  dimension: "USER",
  value: "mallory",
  until: new Date(clock.now() + 60_000),
  note: null,
  createdAt: new Date(clock.now()),
  createdBy: "bootstrap",
  ...fields,
});

describe("BanScreen", () => {
  it("refuses a banned value until the ban ends, to the millisecond, and admits nothing itself", () => {
    const screen = new BanScreen();
    const ban = banOf();
    screen.load([ban]);
    const request = makeCheckRequest({ tenantId: "acme", userId: "mallory" });
    expect(screen.screen(request, clock.now())).toEqual({
      admit: false,
      reason: { code: "BANNED", message: `this request's USER is banned until ${ban.until.toISOString()}`, until: ban.until },
    });
    expect(screen.screen(request, ban.until.getTime() - 1)).not.toBeNull();
    expect(screen.screen(request, ban.until.getTime())).toBeNull();
  });

  it("has no verdict on another tenant, another value, or a request without the dimension", () => {
    const screen = new BanScreen();
    screen.load([banOf()]);
    expect(screen.screen(makeCheckRequest({ tenantId: "other", userId: "mallory" }), clock.now())).toBeNull();
    expect(screen.screen(makeCheckRequest({ tenantId: "acme", userId: "alice" }), clock.now())).toBeNull();
    expect(screen.screen(makeCheckRequest({ tenantId: "acme", userId: null }), clock.now())).toBeNull();
  });

  it("matches IP, API_KEY (by digest) and CLIENT (by fingerprint) as bucket keys name them", () => {
    const request = makeCheckRequest({ tenantId: "acme", userId: null, ip: "10.0.0.1", apiKey: "sk-1", userAgent: "ua" });
    const screen = new BanScreen();
    screen.load([banOf({ dimension: "CLIENT", value: clientFingerprint(request) })]);
    expect(screen.screen(request, clock.now())?.reason.code).toBe("BANNED");
    screen.load([banOf({ dimension: "API_KEY", value: "sk-1" })]);
    expect(screen.screen(request, clock.now())).toBeNull();
    screen.load([banOf({ dimension: "IP", value: "10.0.0.1" })]);
    expect(screen.screen(request, clock.now())?.reason.code).toBe("BANNED");
  });

  it("applies bans and liftings, ignoring the lifting of an id it no longer holds for that value", () => {
    const screen = new BanScreen();
    const request = makeCheckRequest({ tenantId: "acme", userId: "mallory" });
    screen.apply({ kind: "BANNED", ban: banOf({ id: "new" }) });
    screen.apply({ kind: "UNBANNED", ban: banOf({ id: "old" }) });
    expect(screen.screen(request, clock.now())).not.toBeNull();
    screen.apply({ kind: "UNBANNED", ban: banOf({ id: "new" }) });
    expect(screen.screen(request, clock.now())).toBeNull();
    expect(screen.find("acme", "USER", "mallory", clock.now())).toBeNull();
  });
});
