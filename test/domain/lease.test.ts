/** Lease ids (src/domain/lease.ts): what they carry, and which texts are no lease id at all. */

import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/domain/errors.js";
import { decodeLease, encodeLease, memberOf } from "../../src/domain/lease.js";

const HOLDER = "2f1d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b";
const id = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

describe("lease ids", () => {
  it("carry the tenant, the holder and the buckets, and decode to them", () => {
    const claim = { tenantId: "acme", holder: HOLDER, buckets: [{ ruleId: "r1", key: "user:u1" }, { ruleId: "r2", key: "tenant:acme|ip:10.0.0.1" }] };
    const encoded = encodeLease(claim);
    expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeLease(encoded, "id")).toEqual(claim);
  });

  it("name a slot by holder and tenant together", () => {
    expect(memberOf("acme", HOLDER)).toBe(`${HOLDER}:acme`);
  });

  it.each([
    ["empty", ""],
    ["not base64url", "not a lease"],
    ["not JSON", Buffer.from("{").toString("base64url")],
    ["too few parts", id(["acme", HOLDER])],
    ["a holder that is no UUID (it could name another tenant's slot)", id(["evil", `${HOLDER}:x`, [["r1", "user:u1"]]])],
    ["no buckets", id(["acme", HOLDER, []])],
    ["a malformed bucket", id(["acme", HOLDER, [["r1"]]])],
    ["too long", "A".repeat(16_385)],
  ])("refuses %s with a ValidationError naming the field", (_, text) => {
    expect(() => decodeLease(text, "id")).toThrow(ValidationError);
    try {
      decodeLease(text, "id");
    } catch (error) {
      expect((error as ValidationError).message).toBe("id is not a lease id: pass LimitDecision.lease.id as it was given");
    }
  });
});
