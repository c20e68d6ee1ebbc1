import { Field, InputType, ObjectType, registerEnumType } from "type-graphql";
import { CALENDAR_PERIODS, WEEKDAYS, type CalendarPeriod, type Weekday } from "../../domain/calendar.js";
import { enumObject } from "./enums.js";

export const CalendarPeriodEnum = enumObject(CALENDAR_PERIODS);
export const WeekdayEnum = enumObject(WEEKDAYS);

registerEnumType(CalendarPeriodEnum, {
  name: "CalendarPeriod",
  description: "A span of wall-clock time in the calendar's time zone; a DAY of a clock change is 23 or 25 hours, a MONTH 28 to 31 days.",
});
registerEnumType(WeekdayEnum, { name: "Weekday" });

const CALENDAR =
  'FIXED_WINDOW only: the window is the calendar period containing now, in the time zone, instead of window and windowUnit (docs/rules.md#calendar-windows). E.g. { period: MONTH, timeZone: "Europe/Berlin" }: the count starts again on the 1st at 00:00 Berlin time, and resetAt is then.';

@ObjectType("RuleCalendar", { simpleResolvers: true, description: CALENDAR })
export class RuleCalendarType {
  @Field(() => CalendarPeriodEnum)
  period!: CalendarPeriod;

  @Field(() => String, { description: 'An IANA time zone, e.g. "Europe/Berlin", as Intl spells it.' })
  timeZone!: string;

  @Field(() => WeekdayEnum, { nullable: true, description: "The day a WEEK starts on; null for the other periods." })
  weekStartsOn!: Weekday | null;
}

@InputType({ description: CALENDAR })
export class RuleCalendarInput {
  @Field(() => CalendarPeriodEnum)
  period!: CalendarPeriod;

  @Field(() => String, { nullable: true, defaultValue: "UTC", description: 'An IANA time zone, e.g. "Europe/Berlin".' })
  timeZone?: string | null;

  @Field(() => WeekdayEnum, { nullable: true, description: "WEEK only: the day a week starts on (default MONDAY)." })
  weekStartsOn?: Weekday | null;
}
