import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { calendarBoundaries, calendarMarker, calendarPeriod, canonicalTimeZone, CALENDAR_PERIODS, LONGEST_PERIOD_MS, WEEKDAYS, type Calendar } from "../../src/domain/calendar.js";

const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const span = (nowIso: string, calendar: Calendar) => {
  const { startMs, endMs } = calendarPeriod(at(nowIso), calendar);
  return { start: iso(startMs), end: iso(endMs), hours: (endMs - startMs) / HOUR };
};
const berlin = (period: Calendar["period"], weekStartsOn: Calendar["weekStartsOn"] = null): Calendar => ({ period, timeZone: "Europe/Berlin", weekStartsOn });
const newYork = (period: Calendar["period"]): Calendar => ({ period, timeZone: "America/New_York", weekStartsOn: null });

describe("calendarPeriod", () => {
  it("gives Europe/Berlin's spring-forward day its 23 hours and the fall-back day its 25", () => {
    expect(span("2026-03-29T12:00:00Z", berlin("DAY"))).toEqual({ start: "2026-03-28T23:00:00.000Z", end: "2026-03-29T22:00:00.000Z", hours: 23 });
    expect(span("2026-10-25T12:00:00Z", berlin("DAY"))).toEqual({ start: "2026-10-24T22:00:00.000Z", end: "2026-10-25T23:00:00.000Z", hours: 25 });
    // The days either side are 24 hours, in the offsets before and after.
    expect(span("2026-03-28T12:00:00Z", berlin("DAY")).hours).toBe(24);
    expect(span("2026-03-30T12:00:00Z", berlin("DAY"))).toEqual({ start: "2026-03-29T22:00:00.000Z", end: "2026-03-30T22:00:00.000Z", hours: 24 });
  });

  it("gives America/New_York's 2026-03-08 23 hours and 2026-11-01 25", () => {
    expect(span("2026-03-08T12:00:00Z", newYork("DAY"))).toEqual({ start: "2026-03-08T05:00:00.000Z", end: "2026-03-09T04:00:00.000Z", hours: 23 });
    expect(span("2026-11-01T12:00:00Z", newYork("DAY"))).toEqual({ start: "2026-11-01T04:00:00.000Z", end: "2026-11-02T05:00:00.000Z", hours: 25 });
  });

  it("splits the hours of a clock change as the wall clock does: the skipped hour is none, the repeated one is two", () => {
    // 02:00 CET does not exist on 2026-03-29: hour 01 runs into 03:00 CEST.
    expect(span("2026-03-29T00:30:00Z", berlin("HOUR"))).toEqual({ start: "2026-03-29T00:00:00.000Z", end: "2026-03-29T01:00:00.000Z", hours: 1 });
    expect(span("2026-03-29T01:30:00Z", berlin("HOUR"))).toEqual({ start: "2026-03-29T01:00:00.000Z", end: "2026-03-29T02:00:00.000Z", hours: 1 });
    // 02:00-03:00 happens twice on 2026-10-25: the hour starting at the first 02:00 ends at 03:00 CET.
    expect(span("2026-10-25T01:30:00Z", berlin("HOUR"))).toEqual({ start: "2026-10-25T00:00:00.000Z", end: "2026-10-25T02:00:00.000Z", hours: 2 });
  });

  it("starts a day where a jump at midnight lands (America/Santiago skips 00:00 on 2026-09-06)", () => {
    expect(span("2026-09-06T12:00:00Z", { period: "DAY", timeZone: "America/Santiago", weekStartsOn: null })).toEqual({
      start: "2026-09-06T04:00:00.000Z",
      end: "2026-09-07T03:00:00.000Z",
      hours: 23,
    });
  });

  it("skips a day the zone skipped: Pacific/Apia went from 2011-12-29 straight to 2011-12-31", () => {
    const apia: Calendar = { period: "DAY", timeZone: "Pacific/Apia", weekStartsOn: null };
    expect(span("2011-12-29T22:00:00Z", apia)).toEqual({ start: "2011-12-29T10:00:00.000Z", end: "2011-12-30T10:00:00.000Z", hours: 24 });
    expect(span("2011-12-30T10:00:00Z", apia)).toEqual({ start: "2011-12-30T10:00:00.000Z", end: "2011-12-31T10:00:00.000Z", hours: 24 });
  });

  it("gives each month its own length: January 31 days into February, February 2028 its 29th, December into the next year", () => {
    expect(span("2027-01-31T22:59:59.999Z", berlin("MONTH"))).toEqual({ start: "2026-12-31T23:00:00.000Z", end: "2027-01-31T23:00:00.000Z", hours: 31 * 24 });
    expect(span("2027-01-31T23:00:00Z", berlin("MONTH"))).toEqual({ start: "2027-01-31T23:00:00.000Z", end: "2027-02-28T23:00:00.000Z", hours: 28 * 24 });
    expect(span("2028-02-29T12:00:00Z", berlin("MONTH"))).toEqual({ start: "2028-01-31T23:00:00.000Z", end: "2028-02-29T23:00:00.000Z", hours: 29 * 24 });
    expect(span("2026-12-31T23:30:00Z", newYork("MONTH"))).toEqual({ start: "2026-12-01T05:00:00.000Z", end: "2027-01-01T05:00:00.000Z", hours: 31 * 24 });
    expect(span("2026-12-31T23:30:00Z", berlin("MONTH"))).toEqual({ start: "2026-12-31T23:00:00.000Z", end: "2027-01-31T23:00:00.000Z", hours: 31 * 24 });
    // March 2026 in Berlin holds the spring-forward day: one hour short.
    expect(span("2026-03-15T00:00:00Z", berlin("MONTH")).hours).toBe(31 * 24 - 1);
  });

  it("counts a leap year's 366 days and starts the year at local midnight", () => {
    expect(span("2028-06-01T00:00:00Z", { period: "YEAR", timeZone: "UTC", weekStartsOn: null })).toEqual({
      start: "2028-01-01T00:00:00.000Z",
      end: "2029-01-01T00:00:00.000Z",
      hours: 366 * 24,
    });
    expect(span("2026-12-31T23:30:00Z", berlin("YEAR")).start).toBe("2026-12-31T23:00:00.000Z");
  });

  it("starts a week on the day asked for", () => {
    // 2026-12-03 is a Thursday.
    expect(span("2026-12-03T10:00:00Z", berlin("WEEK", "MONDAY"))).toEqual({ start: "2026-11-29T23:00:00.000Z", end: "2026-12-06T23:00:00.000Z", hours: 168 });
    expect(span("2026-12-03T10:00:00Z", berlin("WEEK", "SUNDAY")).start).toBe("2026-11-28T23:00:00.000Z");
    expect(span("2026-12-03T10:00:00Z", berlin("WEEK", "THURSDAY")).start).toBe("2026-12-02T23:00:00.000Z");
    // The week of Berlin's fall-back day is an hour long.
    expect(span("2026-10-25T12:00:00Z", berlin("WEEK", "MONDAY")).hours).toBe(169);
  });

  it("keeps a minute 60 seconds through a fall-back, where the wall clock's 02:59 would last until 03:00 came round again", () => {
    expect(span("2026-10-25T00:59:30Z", berlin("MINUTE"))).toEqual({ start: "2026-10-25T00:59:00.000Z", end: "2026-10-25T01:00:00.000Z", hours: 1 / 60 });
    expect(span("2026-10-25T01:30:10Z", berlin("MINUTE"))).toEqual({ start: "2026-10-25T01:30:00.000Z", end: "2026-10-25T01:31:00.000Z", hours: 1 / 60 });
    // Antarctica/Troll goes back two hours, from +02 to +00, at 01:00 UTC.
    const troll: Calendar = { period: "MINUTE", timeZone: "Antarctica/Troll", weekStartsOn: null };
    expect(span("2026-10-25T00:59:00Z", troll)).toEqual({ start: "2026-10-25T00:59:00.000Z", end: "2026-10-25T01:00:00.000Z", hours: 1 / 60 });
    // India's half-hour offset leaves its minutes the UTC minutes.
    expect(span("2026-12-06T10:15:42Z", { period: "MINUTE", timeZone: "Asia/Kolkata", weekStartsOn: null }).start).toBe("2026-12-06T10:15:00.000Z");
  });

  describe("holds now in [start, end) and tiles time: each period starts where the one before ends (property)", () => {
    const zones = ["UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe", "Asia/Kolkata", "Antarctica/Troll", "Pacific/Chatham", "Pacific/Kiritimati", "America/St_Johns"];
    const holdsAndTiles = (calendar: Calendar, now: number) => {
      const { startMs, endMs } = calendarPeriod(now, calendar);
      expect(startMs).toBeLessThanOrEqual(now);
      expect(now).toBeLessThan(endMs);
      expect(endMs - startMs).toBeLessThanOrEqual(LONGEST_PERIOD_MS[calendar.period]);
      expect(calendarPeriod(endMs, calendar).startMs).toBe(endMs);
      expect(calendarPeriod(startMs - 1, calendar).endMs).toBe(startMs);
    };
    const calendarIn = (timeZone: string) =>
      fc.record({ period: fc.constantFrom(...CALENDAR_PERIODS), weekStartsOn: fc.constantFrom(...WEEKDAYS) }).map(
        ({ period, weekStartsOn }): Calendar => ({ period, timeZone, weekStartsOn: period === "WEEK" ? weekStartsOn : null }),
      );

    it("at any instant of 2024 to 2031", () => {
      const instants = fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2032, 0, 1) });
      fc.assert(
        fc.property(fc.constantFrom(...zones).chain(calendarIn), instants, holdsAndTiles),
        { numRuns: 400 },
      );
    });

    // Drawn evenly, an instant falls within hours of a clock change about
    // once in a thousand runs: these are drawn around the changes themselves.
    it("within three hours of each clock change of 2026 and 2027", () => {
      const changes = zones.flatMap((timeZone) => clockChanges(timeZone, Date.UTC(2026, 0, 1), Date.UTC(2028, 0, 1)).map((ms) => ({ timeZone, ms })));
      expect(changes.length).toBeGreaterThanOrEqual(24);
      const nearChanges = fc
        .constantFrom(...changes)
        .chain(({ timeZone, ms }) => fc.tuple(calendarIn(timeZone), fc.integer({ min: ms - 3 * HOUR, max: ms + 3 * HOUR })));
      fc.assert(
        fc.property(nearChanges, ([calendar, now]) => holdsAndTiles(calendar, now)),
        { numRuns: 400 },
      );
    });
  });
});

/** The hours of [fromMs, toMs) at whose end `timeZone`'s offset from UTC had changed, read through Intl independently of calendar.ts. */
function clockChanges(timeZone: string, fromMs: number, toMs: number): number[] {
  const format = new Intl.DateTimeFormat("en-US", { timeZone, timeZoneName: "longOffset" });
  const offsetAt = (ms: number) => format.formatToParts(ms).find((part) => part.type === "timeZoneName")!.value;
  const changes: number[] = [];
  let before = offsetAt(fromMs);
  for (let ms = fromMs + HOUR; ms < toMs; ms += HOUR) {
    const offset = offsetAt(ms);
    if (offset !== before) changes.push(ms);
    before = offset;
  }
  return changes;
}

describe("calendarBoundaries", () => {
  it("gives six consecutive boundaries, now in the third period", () => {
    const b = calendarBoundaries(at("2027-02-10T00:00:00Z"), berlin("MONTH")).map(iso);
    expect(b).toEqual([
      "2026-11-30T23:00:00.000Z",
      "2026-12-31T23:00:00.000Z",
      "2027-01-31T23:00:00.000Z",
      "2027-02-28T23:00:00.000Z",
      "2027-03-31T22:00:00.000Z",
      "2027-04-30T22:00:00.000Z",
    ]);
  });

  it("answers from its cache only while now stays in the same period", () => {
    const calendar = berlin("DAY");
    const first = calendarBoundaries(at("2026-03-29T12:00:00Z"), calendar);
    expect(calendarBoundaries(at("2026-03-29T21:59:59.999Z"), calendar)).toBe(first);
    expect(calendarBoundaries(at("2026-03-29T22:00:00Z"), calendar)[2]).toBe(at("2026-03-29T22:00:00Z"));
  });
});

describe("canonicalTimeZone and calendarMarker", () => {
  it("spells a zone as Intl does and knows no made-up one", () => {
    expect(canonicalTimeZone("europe/berlin")).toBe("Europe/Berlin");
    expect(canonicalTimeZone("UTC")).toBe("UTC");
    expect(canonicalTimeZone("Mars/Olympus_Mons")).toBeNull();
  });

  it("names each calendar by a negative number of its own", () => {
    const markers = [berlin("MONTH"), newYork("MONTH"), berlin("DAY"), berlin("WEEK", "MONDAY"), berlin("WEEK", "SUNDAY")].map(calendarMarker);
    expect(new Set(markers).size).toBe(5);
    for (const marker of markers) expect(marker).toBeLessThan(0);
    expect(calendarMarker(berlin("MONTH"))).toBe(calendarMarker({ ...berlin("MONTH") }));
  });
});
