/**
 * The access list index: which entry, if any, screens a request, for every
 * kind of entry, IP blocks at their edges, both lists and the "*" tenant;
 * and entries validated to their canonical values.
 */

import { describe, expect, it } from "vitest";
import { validateListEntry, type ListEntry, type ListEntryInput } from "../../../src/domain/access-list.js";
import { ValidationError } from "../../../src/domain/errors.js";
import { parseCheckRequest, type CheckRequestInput } from "../../../src/domain/request.js";
import { AccessListIndex } from "../../../src/engine/access-lists/access-list-index.js";

let ids = 0;
function entry(input: ListEntryInput): ListEntry {
  return { ...validateListEntry({ tenantId: "acme", list: "DENY", ...input }, new Date(0)), id: `e${++ids}`, createdAt: new Date(0), createdBy: "k1" };
}

async function indexOf(...entries: ListEntry[]): Promise<AccessListIndex> {
  const index = new AccessListIndex();
  await index.reload(async () => entries);
  return index;
}

const request = (fields: Partial<CheckRequestInput>) => parseCheckRequest({ tenantId: "acme", ...fields });

describe("AccessListIndex", () => {
  it("refuses an IP inside a block, and only inside it, IPv4 and IPv6", async () => {
    const v4 = entry({ kind: "IP", value: "10.0.0.0/8" });
    const v6 = entry({ kind: "IP", value: "2001:db8::/32" });
    const index = await indexOf(v4, v6);
    expect(index.deny.screen(request({ ip: "10.255.1.2" }), 0)).toEqual({
      admit: false,
      reason: { code: "DENY_LISTED", message: `the request's IP address is on the tenant's deny list (entry ${v4.id})`, until: null },
    });
    expect(index.deny.screen(request({ ip: "11.0.0.1" }), 0)).toBeNull();
    expect(index.deny.screen(request({ ip: "2001:DB8:ffff::1" }), 0)?.reason.message).toContain(v6.id);
    expect(index.deny.screen(request({ ip: "2001:db9::1" }), 0)).toBeNull();
  });

  it("matches an IPv4-mapped IPv6 address against its IPv4 entry", async () => {
    const index = await indexOf(entry({ kind: "IP", value: "192.168.1.0/24" }));
    expect(index.deny.screen(request({ ip: "::ffff:192.168.1.7" }), 0)).not.toBeNull();
    expect(index.deny.screen(request({ ip: "::ffff:c0a8:107" }), 0)).not.toBeNull();
  });

  it("takes /0, /32 and /128 at their edges", async () => {
    const all4 = await indexOf(entry({ kind: "IP", value: "0.0.0.0/0" }));
    expect(all4.deny.screen(request({ ip: "203.0.113.9" }), 0)).not.toBeNull();
    expect(all4.deny.screen(request({ ip: "::1" }), 0)).toBeNull();
    const all6 = await indexOf(entry({ kind: "IP", value: "::/0" }));
    expect(all6.deny.screen(request({ ip: "2001:db8::1" }), 0)).not.toBeNull();
    expect(all6.deny.screen(request({ ip: "203.0.113.9" }), 0)).toBeNull();
    const one4 = await indexOf(entry({ kind: "IP", value: "203.0.113.9/32" }));
    expect(one4.deny.screen(request({ ip: "203.0.113.9" }), 0)).not.toBeNull();
    expect(one4.deny.screen(request({ ip: "203.0.113.8" }), 0)).toBeNull();
    const one6 = await indexOf(entry({ kind: "IP", value: "2001:db8::1/128" }));
    expect(one6.deny.screen(request({ ip: "2001:db8:0::1" }), 0)).not.toBeNull();
    expect(one6.deny.screen(request({ ip: "2001:db8::2" }), 0)).toBeNull();
  });

  it("matches users and API keys exactly, and user agents by glob whatever their case", async () => {
    const index = await indexOf(
      entry({ kind: "USER", value: "mallory" }),
      entry({ kind: "API_KEY", value: "sk-leaked" }),
      entry({ kind: "USER_AGENT", value: "*Python-Requests/*" }),
      entry({ kind: "USER_AGENT", value: "BadBot" }),
    );
    const refused = (fields: Partial<CheckRequestInput>) => index.deny.screen(request(fields), 0) !== null;
    expect(refused({ userId: "mallory" })).toBe(true);
    expect(refused({ userId: "Mallory" })).toBe(false);
    expect(refused({ apiKey: "sk-leaked" })).toBe(true);
    expect(refused({ apiKey: "sk-leaked2" })).toBe(false);
    expect(refused({ userAgent: "my-tool python-requests/2.31" })).toBe(true);
    expect(refused({ userAgent: "PYTHON-REQUESTS/2.31" })).toBe(true);
    expect(refused({ userAgent: "python-requests" })).toBe(false);
    expect(refused({ userAgent: "badbot" })).toBe(true);
    expect(refused({ userAgent: "badbot/2" })).toBe(false);
  });

  it("keeps the lists and the tenants apart, and applies the \"*\" list to every tenant", async () => {
    const allowed = entry({ list: "ALLOW", kind: "USER", value: "partner" });
    const everyone = entry({ tenantId: "*", kind: "USER", value: "spammer" });
    const index = await indexOf(allowed, everyone, entry({ tenantId: "other", kind: "USER", value: "eve" }));
    expect(index.deny.screen(request({ userId: "partner" }), 0)).toBeNull();
    expect(index.allow.screen(request({ userId: "partner" }), 0)).toEqual({
      admit: true,
      reason: { code: "ALLOW_LISTED", message: `the request's user is on the tenant's allow list (entry ${allowed.id})`, until: null },
    });
    expect(index.deny.screen(request({ userId: "spammer" }), 0)?.reason.message).toBe(`the request's user is on every tenant's deny list (entry ${everyone.id})`);
    expect(index.deny.screen(request({ userId: "eve" }), 0)).toBeNull();
  });

  it("skips an expired entry where it is met, a live shorter block still answering, and says when a live one ends", async () => {
    const until = new Date(10_000);
    const index = await indexOf(entry({ kind: "IP", value: "10.1.0.0/16", expiresAt: new Date(5_000) }), entry({ kind: "IP", value: "10.0.0.0/8", expiresAt: until }));
    const at = (nowMs: number) => index.deny.screen(request({ ip: "10.1.2.3" }), nowMs);
    expect(at(4_999)?.reason.message).toContain("e");
    expect(at(5_000)?.reason.until).toEqual(until);
    expect(at(10_000)).toBeNull();
  });

  it("applies additions and removals, and keeps those heard while a reload reads", async () => {
    const index = await indexOf();
    const first = entry({ kind: "USER", value: "u1" });
    const second = entry({ kind: "USER", value: "u2" });
    index.apply({ kind: "ADDED", entry: first, at: new Date(), actor: null });
    expect(index.deny.screen(request({ userId: "u1" }), 0)).not.toBeNull();
    await index.reload(async () => {
      // Heard after the read, before the load: the read says first is there and second is not.
      index.apply({ kind: "REMOVED", entry: first, at: new Date(), actor: null });
      index.apply({ kind: "ADDED", entry: second, at: new Date(), actor: null });
      return [first];
    });
    expect(index.deny.screen(request({ userId: "u1" }), 0)).toBeNull();
    expect(index.deny.screen(request({ userId: "u2" }), 0)).not.toBeNull();
    expect(index.size).toBe(1);
  });
});

describe("validateListEntry", () => {
  const valueOf = (kind: string, value: string) => validateListEntry({ tenantId: "acme", list: "DENY", kind, value }, new Date(0)).value;
  const failure = (input: ListEntryInput) => {
    try {
      validateListEntry({ tenantId: "acme", list: "DENY", kind: "IP", ...input }, new Date(1_000));
    } catch (error) {
      if (error instanceof ValidationError) return { field: error.field, message: error.message };
      throw error;
    }
    throw new Error("expected a ValidationError");
  };

  it("stores canonical values", () => {
    expect(valueOf("IP", "2001:DB8:0:0::/32")).toBe("2001:db8::/32");
    expect(valueOf("IP", "::ffff:10.1.2.3")).toBe("10.1.2.3");
    expect(valueOf("USER_AGENT", "*CURL/*")).toBe("*curl/*");
    expect(valueOf("API_KEY", "sk-leaked")).toMatch(/^sha256:[A-Za-z0-9_-]{22}$/);
    expect(valueOf("API_KEY", valueOf("API_KEY", "sk-leaked"))).toBe(valueOf("API_KEY", "sk-leaked"));
  });

  it("names the field of each failure", () => {
    expect(failure({ value: "10.1.2.3/8" })).toEqual({ field: "input.value", message: "input.value has address bits set past its /8: give the block's network address" });
    expect(failure({ value: "10.0.0.0/33" })).toEqual({ field: "input.value", message: 'input.value must end in a prefix length from 0 to 32 (got "33")' });
    expect(failure({ value: "not-an-ip" }).field).toBe("input.value");
    expect(failure({ kind: "HOST" })).toEqual({ field: "input.kind", message: 'input.kind must be one of IP, USER, API_KEY, USER_AGENT (got "HOST")' });
    expect(failure({ list: "MAYBE" }).field).toBe("input.list");
    expect(failure({ kind: "USER_AGENT", value: "**" }).field).toBe("input.value");
    expect(failure({ tenantId: "" }).field).toBe("input.tenantId");
    expect(failure({ value: "10.0.0.0/8", expiresAt: new Date(1_000) })).toEqual({ field: "input.expiresAt", message: "input.expiresAt must be in the future (got 1970-01-01T00:00:01.000Z)" });
  });
});
