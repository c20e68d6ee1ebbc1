/**
 * Calendar periods: "1,000 per month, resets on the 1st at 00:00
 * Europe/Berlin". A period is a span of wall-clock time in a time zone (a
 * minute, hour, day, week, month or year) turned into the instants it covers,
 * [startMs, endMs), with Intl's time zone data: so a month has its 28 to 31
 * days, a leap year its 29 February, and a day its 23 or 25 hours when the
 * clocks change inside it.
 *
 * A period starts at the first instant whose wall-clock time is at or past
 * its first wall-clock time: when that time does not exist (the clocks jump
 * over it) the period starts where the jump lands, and when it exists twice
 * (the clocks go back over it) at the first. Each period ends where the next
 * starts, so the periods of a calendar tile time without gap or overlap.
 *
 * A MINUTE is the exception: it is always the 60 seconds of a UTC minute.
 * Every offset in use today is a whole number of minutes, so these are the
 * wall clock's minutes in every zone; read by the rule above, the last
 * minute before the clocks go back would last until the repeated time had
 * passed (an hour and a minute in Europe/Berlin, two hours and a minute in
 * Antarctica/Troll).
 */

import { fnv1a } from "./fnv1a.js";

export const CALENDAR_PERIODS = ["MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"] as const;
export type CalendarPeriod = (typeof CALENDAR_PERIODS)[number];

/** In the order of Date.getUTCDay(), Sunday first. */
export const WEEKDAYS = ["SUNDAY", "MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY"] as const;
export type Weekday = (typeof WEEKDAYS)[number];

export interface Calendar {
  period: CalendarPeriod;
  /** An IANA time zone name, e.g. "Europe/Berlin". */
  timeZone: string;
  /** The day a WEEK starts on; null for the other periods. */
  weekStartsOn: Weekday | null;
}

export const CALENDAR_DEFAULTS = { timeZone: "UTC", weekStartsOn: "MONDAY" as Weekday } as const;

export interface Span {
  startMs: number;
  endMs: number;
}

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/**
 * The longest each period can be anywhere: its nominal length plus the
 * largest clock change (2 hours, Antarctica/Troll), except for a minute,
 * which is always 60 seconds (see above). Stores keep a period's counts this
 * long twice over (the period and the next, which THROTTLE queues into).
 */
export const LONGEST_PERIOD_MS: Record<CalendarPeriod, number> = {
  MINUTE: MINUTE_MS,
  HOUR: 3 * HOUR_MS,
  DAY: DAY_MS + 2 * HOUR_MS,
  WEEK: 7 * DAY_MS + 2 * HOUR_MS,
  MONTH: 31 * DAY_MS + 2 * HOUR_MS,
  YEAR: 366 * DAY_MS + 2 * HOUR_MS,
};

/**
 * The time zone's name as Intl spells it ("europe/berlin" is
 * "Europe/Berlin"), so that one zone is one calendar; null when Intl does not
 * know it.
 */
export function canonicalTimeZone(name: string): string | null {
  try {
    return formatterOf(name).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** The period of `calendar` that contains `nowMs`: startMs <= nowMs < endMs. */
export function calendarPeriod(nowMs: number, calendar: Calendar): Span {
  if (calendar.period === "MINUTE") return utcMinuteOf(nowMs);
  const wall = wallClock(nowMs, calendar.timeZone);
  const firstWall = periodStartWall(wall, calendar);
  let span = { startMs: instantOf(firstWall, calendar.timeZone), endMs: instantOf(addPeriod(firstWall, calendar.period), calendar.timeZone) };
  // Where the clocks go back across a period's start, the wall clock shows
  // the period before for a while after the next has begun.
  while (nowMs >= span.endMs) span = nextSpan(span, calendar);
  return span;
}

/**
 * Six consecutive boundaries of the calendar's periods, the period holding
 * `nowMs` from the third to the fourth: enough for a store whose clock is a
 * period behind or ahead of this one to find its own period, the one before
 * it and the one after (see "Calendars" in lua/decide.lua). Kept per
 * calendar while `nowMs` stays in the same period: computing them costs some
 * twenty Intl calls.
 */
export function calendarBoundaries(nowMs: number, calendar: Calendar): readonly number[] {
  const key = calendarKey(calendar);
  const known = boundaryCache.get(key);
  if (known !== undefined && known[2]! <= nowMs && nowMs < known[3]!) return known;
  const current = calendarPeriod(nowMs, calendar);
  const previous = calendarPeriod(current.startMs - 1, calendar);
  const beforePrevious = calendarPeriod(previous.startMs - 1, calendar);
  const next = nextSpan(current, calendar);
  const afterNext = nextSpan(next, calendar);
  const boundaries = [beforePrevious.startMs, previous.startMs, current.startMs, current.endMs, next.endMs, afterNext.endMs];
  if (boundaryCache.size >= MOST_CACHED_CALENDARS) boundaryCache.clear();
  boundaryCache.set(key, boundaries);
  return boundaries;
}

/**
 * A negative number naming the calendar in a fixed window's stored state,
 * where a plain window keeps its length (always positive): a state counted
 * under another window or calendar is recognised as such and carried over.
 */
export function calendarMarker(calendar: Calendar): number {
  return -(1 + fnv1a(calendarKey(calendar)));
}

export function sameCalendar(a: Calendar | undefined, b: Calendar | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && calendarKey(a) === calendarKey(b));
}

function calendarKey({ period, timeZone, weekStartsOn }: Calendar): string {
  return `${period}/${timeZone}/${weekStartsOn ?? ""}`;
}

const boundaryCache = new Map<string, readonly number[]>();
const MOST_CACHED_CALENDARS = 1000;

function nextSpan(span: Span, calendar: Calendar): Span {
  if (calendar.period === "MINUTE") return utcMinuteOf(span.endMs);
  const firstWall = periodStartWall(wallClock(span.endMs, calendar.timeZone), calendar);
  return { startMs: span.endMs, endMs: instantOf(addPeriod(firstWall, calendar.period), calendar.timeZone) };
}

function utcMinuteOf(ms: number): Span {
  const startMs = ms - (((ms % MINUTE_MS) + MINUTE_MS) % MINUTE_MS);
  return { startMs, endMs: startMs + MINUTE_MS };
}

/** A wall-clock time as the UTC epoch milliseconds of the same fields (so Date.UTC's arithmetic on fields applies). */
type Wall = number;

function periodStartWall(wall: Wall, calendar: Calendar): Wall {
  const d = new Date(wall);
  const [year, month, day, hour, minute] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes()];
  switch (calendar.period) {
    case "MINUTE":
      return Date.UTC(year, month, day, hour, minute);
    case "HOUR":
      return Date.UTC(year, month, day, hour);
    case "DAY":
      return Date.UTC(year, month, day);
    case "WEEK": {
      const start = WEEKDAYS.indexOf(calendar.weekStartsOn ?? CALENDAR_DEFAULTS.weekStartsOn);
      return Date.UTC(year, month, day - ((d.getUTCDay() - start + 7) % 7));
    }
    case "MONTH":
      return Date.UTC(year, month, 1);
    case "YEAR":
      return Date.UTC(year, 0, 1);
  }
}

function addPeriod(wall: Wall, period: CalendarPeriod): Wall {
  const d = new Date(wall);
  const [year, month, day, hour, minute] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes()];
  switch (period) {
    case "MINUTE":
      return Date.UTC(year, month, day, hour, minute + 1);
    case "HOUR":
      return Date.UTC(year, month, day, hour + 1);
    case "DAY":
      return Date.UTC(year, month, day + 1);
    case "WEEK":
      return Date.UTC(year, month, day + 7);
    case "MONTH":
      return Date.UTC(year, month + 1, 1);
    case "YEAR":
      return Date.UTC(year + 1, 0, 1);
  }
}

/**
 * The first instant whose wall-clock time in `timeZone` is at or past
 * `wall`. Such an instant lies within 14 hours of `wall` read as UTC (no
 * offset is larger), and no zone changes its offset twice within two days,
 * so the offsets a day before and a day after are the only candidates; when
 * neither gives `wall` back, it lies in a jump forward, and the jump is found
 * by bisection between them.
 */
function instantOf(wall: Wall, timeZone: string): number {
  const before = wall - offsetAt(wall - DAY_MS, timeZone);
  const after = wall - offsetAt(wall + DAY_MS, timeZone);
  const exact = [before, after].filter((t) => wallClock(t, timeZone) === wall);
  if (exact.length > 0) return Math.min(...exact);
  let [low, high] = before < after ? [before, after] : [after, before];
  while (high - low > 1000) {
    const mid = low + Math.floor((high - low) / 2000) * 1000;
    if (wallClock(mid, timeZone) >= wall) high = mid;
    else low = mid;
  }
  return high;
}

/** The offset of `timeZone` from UTC at `ms`, in milliseconds (whole seconds). */
function offsetAt(ms: number, timeZone: string): number {
  return wallClock(ms, timeZone) - floorToSecond(ms);
}

function floorToSecond(ms: number): number {
  return ms - (((ms % 1000) + 1000) % 1000);
}

/** The wall-clock time in `timeZone` at `ms`, to the second. */
function wallClock(ms: number, timeZone: string): Wall {
  const fields: Record<string, number> = {};
  for (const part of formatterOf(timeZone).formatToParts(ms)) {
    if (part.type !== "literal") fields[part.type] = Number(part.value);
  }
  return Date.UTC(fields.year!, fields.month! - 1, fields.day!, fields.hour!, fields.minute!, fields.second!);
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    if (formatters.size >= MOST_CACHED_CALENDARS) formatters.clear();
    formatters.set(timeZone, formatter);
  }
  return formatter;
}
