-- A rule's calendar: a FIXED_WINDOW rule may count per calendar period in a time zone instead of per window,
-- as { "period": "MONTH", "timeZone": "Europe/Berlin", "weekStartsOn": null } (src/domain/calendar.ts). One JSON value,
-- read and written whole like the rule's conditions. Existing rules have none: their windows stay as they were.
-- AlterTable
ALTER TABLE "rules" ADD COLUMN "calendar" JSONB;
