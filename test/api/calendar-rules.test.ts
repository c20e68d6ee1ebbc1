/**
 * Calendar rules through the API: created, changed, rolled back and checked
 * over GraphQL, with resetAt, retryAfter and every header giving the end of
 * the calendar period as the reset.
 */

import { describe, expect, it } from "vitest";
import { CalendarRuleHistoryDocument, CreateCalendarRuleDocument, RollbackRuleDocument, UpdateCalendarRuleDocument } from "../generated/graphql.js";
import { calendarPeriod } from "../../src/domain/calendar.js";
import { check, describeOnEachStorage, expectBadUserInput, header, newTenant } from "../support/api.js";

const BERLIN_MONTH = { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null } as const;

await describeOnEachStorage("calendar rules", (suite) => {
  const create = (tenantId: string, fields: Record<string, unknown> = {}) =>
    suite.client.data(CreateCalendarRuleDocument, {
      input: { tenantId, name: "monthly", scope: ["USER"], algorithm: "FIXED_WINDOW", limit: 2, window: 1, windowUnit: "DAYS", calendar: { period: "MONTH", timeZone: "Europe/Berlin" }, ...fields },
    });

  it("creates a rule counting per month in Europe/Berlin, the defaults filled in", async () => {
    const { createRule } = await create(newTenant());
    expect(createRule).toMatchObject({ algorithm: "FIXED_WINDOW", calendar: BERLIN_MONTH });
  });

  it("resets at the end of the month in Berlin: resetAt, retryAfter, X-RateLimit-Reset, Retry-After and RateLimit's t", async () => {
    const tenantId = newTenant();
    await create(tenantId);
    const before = calendarPeriod(Date.now(), BERLIN_MONTH).endMs;
    const request = { tenantId, userId: "u1" };
    const first = await check(suite.client, request);
    await check(suite.client, request);
    const denied = await check(suite.client, request);
    const answeredAt = Date.now();
    const end = calendarPeriod(answeredAt, BERLIN_MONTH).endMs;
    expect(end).toBe(before); // no month ended during the test
    expect(first).toMatchObject({ allowed: true, remaining: 1, resetAt: new Date(end).toISOString() });
    expect(denied).toMatchObject({ allowed: false, remaining: 0, resetAt: new Date(end).toISOString() });
    expect(header(denied.headers, "X-RateLimit-Reset")).toBe(String(Math.ceil(end / 1000)));
    const retryAfter = denied.retryAfter!;
    expect(Math.abs(retryAfter - Math.ceil((end - answeredAt) / 1000))).toBeLessThanOrEqual(2);
    expect(header(denied.headers, "Retry-After")).toBe(String(retryAfter));
    expect(header(denied.headers, "RateLimit")).toContain(`"monthly";r=0;t=${retryAfter};`);
  });

  it("refuses an unknown time zone, weekStartsOn outside WEEK and a calendar on another algorithm, naming the field", async () => {
    const tenantId = newTenant();
    const zone = await suite.client.request(CreateCalendarRuleDocument, {
      input: { tenantId, name: "a", algorithm: "FIXED_WINDOW", limit: 1, window: 1, calendar: { period: "DAY", timeZone: "Europe/Atlantis" } },
    });
    expectBadUserInput(zone.errors, "input.calendar.timeZone");
    const weekday = await suite.client.request(CreateCalendarRuleDocument, {
      input: { tenantId, name: "b", algorithm: "FIXED_WINDOW", limit: 1, window: 1, calendar: { period: "DAY", weekStartsOn: "MONDAY" } },
    });
    expectBadUserInput(weekday.errors, "input.calendar.weekStartsOn");
    const sliding = await suite.client.request(CreateCalendarRuleDocument, { input: { tenantId, name: "c", limit: 1, window: 1, calendar: { period: "DAY" } } });
    expectBadUserInput(sliding.errors, "input.calendar");
  });

  describe("changes", () => {
    it("changes, clears and rolls back a calendar, each version in the history", async () => {
      const { createRule } = await create(newTenant());
      const weekly = await suite.client.data(UpdateCalendarRuleDocument, { id: createRule.id, input: { calendar: { period: "WEEK", timeZone: "America/New_York", weekStartsOn: "SUNDAY" } } });
      expect(weekly.updateRule.calendar).toEqual({ period: "WEEK", timeZone: "America/New_York", weekStartsOn: "SUNDAY" });
      const cleared = await suite.client.data(UpdateCalendarRuleDocument, { id: createRule.id, input: { calendar: null } });
      expect(cleared.updateRule.calendar).toBeNull();
      const rolledBack = (await suite.client.data(RollbackRuleDocument, { id: createRule.id, version: 1 })).rollbackRule;
      expect(rolledBack.version).toBe(4);
      const history = (await suite.client.data(CalendarRuleHistoryDocument, { id: createRule.id })).ruleHistory;
      expect(history.map((r) => r.after?.calendar ?? null)).toEqual([BERLIN_MONTH, weekly.updateRule.calendar, null, BERLIN_MONTH]);
    });
  });
});
