/**
 * The DateTime scalar answers what graphql-scalars' DateTimeResolver answers,
 * as text: the bytes JSON.stringify writes for its Date, whatever instants
 * share a slot of what it remembers.
 */

import { DateTimeResolver } from "graphql-scalars";
import { describe, expect, it } from "vitest";
import { DateTimeScalar, isoText } from "../../src/api/date-time.js";

describe("DateTimeScalar", () => {
  it("serialises to the text JSON.stringify writes for graphql-scalars' Date, for Dates, texts and numbers", () => {
    for (const value of [new Date(Date.UTC(2026, 11, 4, 21, 19)), "2026-12-04T21:19:00.123+01:00", 1_796_419_140_000, new Date(Date.UTC(10_000, 0, 1))]) {
      expect(JSON.stringify(DateTimeScalar.serialize(value))).toBe(JSON.stringify(DateTimeResolver.serialize(value)));
    }
  });

  it("gives each instant its own text when instants share a remembered slot, alternating", () => {
    const base = Date.UTC(2026, 11, 4);
    // 256 ms apart: the same slot of the 256 remembered.
    const instants = [base, base + 256, base + 512, base, base + 512, base + 256];
    for (const instant of instants) expect(isoText(new Date(instant))).toBe(new Date(instant).toISOString());
  });

  it("refuses what graphql-scalars refuses, with its message", () => {
    expect(() => DateTimeScalar.serialize(new Date(Number.NaN))).toThrow("DateTime cannot represent an invalid Date instance");
    expect(() => DateTimeScalar.serialize("yesterday")).toThrow(/invalid date-time-string/);
  });

  it("keeps the contract's name and graphql-scalars' parsing", () => {
    expect(DateTimeScalar.name).toBe("DateTime");
    expect(DateTimeScalar.parseValue("2026-12-04T21:19:00Z")).toEqual(new Date(Date.UTC(2026, 11, 4, 21, 19)));
  });
});
