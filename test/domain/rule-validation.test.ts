import { describe, expect, it } from "vitest";
import type { ValidationError } from "../../src/domain/errors.js";
import type { Rule } from "../../src/domain/rule.js";
import { checkNewRule, sameSpec, specOf, validateNewRule, validateRuleChange, type RuleInput } from "../../src/domain/rule-validation.js";
import { LENGTHS, RULE_BOUNDS } from "../../src/domain/service-limits.js";
import { CONTRACT_RULE_DEFAULTS, makeNonDefaultRuleSpec, makeRule } from "../support/domain-factory.js";
import { validationErrorOf } from "../support/validation-error.js";

const valid = { tenantId: "acme", name: "per-user", limit: 100, window: 60 } as const;

const METHODS = "GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH";
const EXACTNESS = "keeps fractions of tokens exactly, which needs (burst + limit) x window in ms <= 2^52; shorten the window or lower the numbers";

function rejectNew(input: RuleInput, prefix?: string): ValidationError {
  return validationErrorOf(() => validateNewRule(input, prefix), input);
}

/** The rule a change applies to: no field at its default, so a change that keeps a field shows it kept. */
function existing(fields: Partial<Rule> = {}): Rule {
  return makeRule({ ...makeNonDefaultRuleSpec(), id: "rule-1", version: 3, ...fields });
}

describe("validateNewRule defaults", () => {
  it("applies every default to a minimal rule", () => {
    expect(validateNewRule(valid)).toEqual({ tenantId: "acme", name: "per-user", limit: 100, window: 60, ...CONTRACT_RULE_DEFAULTS });
  });

  it("applies the defaults when defaulted fields are explicitly null", () => {
    const input = {
      ...valid,
      scope: null,
      resource: null,
      method: null,
      algorithm: null,
      windowUnit: null,
      burst: null,
      action: null,
      failureMode: null,
      priority: null,
      enabled: null,
    };
    expect(validateNewRule(input)).toEqual(validateNewRule(valid));
  });

  it("applies the defaults when defaulted fields are explicitly undefined", () => {
    expect(validateNewRule({ ...valid, algorithm: undefined, priority: undefined })).toEqual(validateNewRule(valid));
  });

  it("keeps every given field", () => {
    const input = makeNonDefaultRuleSpec({ tenantId: "*", name: "global" });
    expect(validateNewRule(input)).toEqual(input);
  });

  it("does not share the default scope array between rules", () => {
    const a = validateNewRule(valid);
    const b = validateNewRule(valid);
    a.scope.push("USER");
    expect(b.scope).toEqual([]);
  });

  it("drops fields that are not part of a rule", () => {
    expect(validateNewRule({ ...valid, ...({ id: "x", version: 9 } as RuleInput) })).toEqual(validateNewRule(valid));
  });
});

describe("validateNewRule required fields", () => {
  it.each(["tenantId", "name", "limit", "window"] as const)("requires %s", (field) => {
    const input: RuleInput = { ...valid };
    delete input[field];
    const error = rejectNew(input);
    expect(error.field).toBe(`input.${field}`);
    expect(error.message).toBe(`input.${field} is required`);
  });

  it.each(["tenantId", "name", "limit", "window"] as const)("requires %s also when it is null", (field) => {
    expect(rejectNew({ ...valid, [field]: null }).message).toBe(`input.${field} is required`);
  });

  it("names fields under the given prefix", () => {
    const error = rejectNew({ ...valid, limit: 0 }, "rules[2]");
    expect(error.field).toBe("rules[2].limit");
    expect(error.message).toBe("rules[2].limit must be at least 1 (got 0)");
  });
});

describe("validateNewRule name", () => {
  it("rejects an empty name", () => {
    expect(rejectNew({ ...valid, name: "" }).message).toBe("input.name must not be empty");
  });

  it("rejects a whitespace-only name", () => {
    expect(rejectNew({ ...valid, name: "  \u00a0 " }).message).toBe("input.name must not be empty");
  });

  it(`accepts ${LENGTHS.ruleName} characters`, () => {
    expect(validateNewRule({ ...valid, name: "n".repeat(200) }).name).toBe("n".repeat(200));
  });

  it("rejects 201 characters", () => {
    expect(rejectNew({ ...valid, name: "n".repeat(201) }).message).toBe("input.name must be at most 200 characters (got 201)");
  });

  it.each(["a\u0000b", "a\nb", "a\tb", "a\u007f"])("rejects control characters in %j", (name) => {
    expect(rejectNew({ ...valid, name }).message).toBe("input.name must not contain control characters");
  });

  it("rejects a name that is not a string", () => {
    expect(rejectNew({ ...valid, name: 42 }).message).toBe("input.name must be a string");
  });

  it("keeps surrounding spaces and unicode", () => {
    expect(validateNewRule({ ...valid, name: " Café – per user " }).name).toBe(" Café – per user ");
  });
});

describe("validateNewRule tenantId", () => {
  it("rejects an empty tenantId", () => {
    const error = rejectNew({ ...valid, tenantId: "" });
    expect(error.field).toBe("input.tenantId");
    expect(error.message).toBe("input.tenantId must not be empty");
  });

  it("rejects a tenantId longer than 128 characters", () => {
    expect(rejectNew({ ...valid, tenantId: "t".repeat(129) }).message).toBe("input.tenantId must be at most 128 characters (got 129)");
  });

  it('accepts "*" for a rule of every tenant', () => {
    expect(validateNewRule({ ...valid, tenantId: "*" }).tenantId).toBe("*");
  });

  it("rejects control characters", () => {
    expect(rejectNew({ ...valid, tenantId: "ac\u0001me" }).message).toBe("input.tenantId must not contain control characters");
  });
});

describe("validateNewRule limit", () => {
  it("rejects 0", () => {
    expect(rejectNew({ ...valid, limit: 0 }).message).toBe("input.limit must be at least 1 (got 0)");
  });

  it("rejects a negative limit", () => {
    expect(rejectNew({ ...valid, limit: -5 }).message).toBe("input.limit must be at least 1 (got -5)");
  });

  it("accepts 1_000_000_000", () => {
    expect(validateNewRule({ ...valid, limit: 1_000_000_000 }).limit).toBe(1_000_000_000);
  });

  it("rejects 1_000_000_001", () => {
    expect(rejectNew({ ...valid, limit: 1_000_000_001 }).message).toBe("input.limit must be at most 1000000000 (got 1000000001)");
  });

  it("rejects a fraction", () => {
    expect(rejectNew({ ...valid, limit: 1.5 }).message).toBe("input.limit must be an integer (got 1.5)");
  });

  it("rejects a numeric string", () => {
    expect(rejectNew({ ...valid, limit: "10" }).message).toBe('input.limit must be an integer (got "10")');
  });

  it("rejects NaN", () => {
    const error = rejectNew({ ...valid, limit: Number.NaN });
    expect(error.field).toBe("input.limit");
    expect(error.message).toMatch(/^input\.limit must be an integer \(got /);
  });
});

describe("validateNewRule calendar", () => {
  const fixed = { ...valid, algorithm: "FIXED_WINDOW" } as const;

  it("fills in the defaults: time zone UTC, and weeks starting on Monday", () => {
    expect(validateNewRule({ ...fixed, calendar: { period: "MONTH" } }).calendar).toEqual({ period: "MONTH", timeZone: "UTC", weekStartsOn: null });
    expect(validateNewRule({ ...fixed, calendar: { period: "WEEK", timeZone: null, weekStartsOn: null } }).calendar).toEqual({ period: "WEEK", timeZone: "UTC", weekStartsOn: "MONDAY" });
  });

  it("keeps a time zone by the name Intl gives it, so one zone is one calendar", () => {
    expect(validateNewRule({ ...fixed, calendar: { period: "WEEK", timeZone: "europe/berlin", weekStartsOn: "SUNDAY" } }).calendar).toEqual({
      period: "WEEK",
      timeZone: "Europe/Berlin",
      weekStartsOn: "SUNDAY",
    });
  });

  it("rejects an unknown time zone, naming calendar.timeZone", () => {
    const error = rejectNew({ ...fixed, calendar: { period: "DAY", timeZone: "Europe/Atlantis" } });
    expect(error.field).toBe("input.calendar.timeZone");
    expect(error.message).toBe('input.calendar.timeZone must be an IANA time zone such as "Europe/Berlin" (got "Europe/Atlantis")');
  });

  it("rejects weekStartsOn for a period other than WEEK", () => {
    const error = rejectNew({ ...fixed, calendar: { period: "MONTH", weekStartsOn: "MONDAY" } });
    expect(error.message).toBe("input.calendar.weekStartsOn is only for period WEEK (got period MONTH)");
  });

  it("rejects a missing or unknown period, an unknown weekday and a field a calendar does not have", () => {
    expect(rejectNew({ ...fixed, calendar: {} }).message).toBe('input.calendar.period must be one of MINUTE, HOUR, DAY, WEEK, MONTH, YEAR (got undefined)');
    expect(rejectNew({ ...fixed, calendar: { period: "WEEK", weekStartsOn: "FUNDAY" } }).field).toBe("input.calendar.weekStartsOn");
    expect(rejectNew({ ...fixed, calendar: { period: "DAY", zone: "UTC" } }).message).toBe(
      "input.calendar.zone is not a field of a calendar; its fields are period, timeZone and weekStartsOn",
    );
    expect(rejectNew({ ...fixed, calendar: "MONTH" }).message).toBe("input.calendar must be { period, timeZone, weekStartsOn }");
  });

  it.each(["SLIDING_WINDOW_COUNTER", "TOKEN_BUCKET", "SLIDING_WINDOW_LOG", "LEAKY_BUCKET"] as const)("refuses a calendar for %s, naming calendar", (algorithm) => {
    const error = rejectNew({ ...valid, algorithm, calendar: { period: "MONTH" } });
    expect(error.field).toBe("input.calendar");
    expect(error.message).toBe(
      `input.calendar needs FIXED_WINDOW, whose count starts again when a period starts (got ${algorithm}); a sliding or draining limit has no period boundary to reset on`,
    );
  });

  it("clears a calendar with null in a change, and sees a changed calendar as a change", () => {
    const rule = existing({ algorithm: "FIXED_WINDOW", burst: null, calendar: { period: "DAY", timeZone: "UTC", weekStartsOn: null } });
    expect(validateRuleChange(rule, { calendar: null }).calendar).toBeNull();
    const moved = validateRuleChange(rule, { calendar: { period: "DAY", timeZone: "Asia/Tokyo" } });
    expect(sameSpec(moved, specOf(rule))).toBe(false);
    expect(sameSpec(validateRuleChange(rule, {}), specOf(rule))).toBe(true);
  });
});

describe("validateNewRule window", () => {
  it("rejects 0", () => {
    const error = rejectNew({ ...valid, window: 0 });
    expect(error.field).toBe("input.window");
    expect(error.message).toBe("input.window must be at least 1 (got 0)");
  });

  it.each([
    [366, "DAYS"],
    [8784, "HOURS"],
    [527_040, "MINUTES"],
    [31_622_400, "SECONDS"],
  ] as const)("accepts %i %s, which is 366 days", (window, windowUnit) => {
    expect(validateNewRule({ ...valid, window, windowUnit })).toMatchObject({ window, windowUnit });
  });

  it.each([
    [367, "DAYS", "367 days"],
    [8785, "HOURS", "8785 hours"],
    [527_041, "MINUTES", "527041 minutes"],
  ] as const)("rejects %i %s, which is more than 366 days", (window, windowUnit, shown) => {
    const error = rejectNew({ ...valid, window, windowUnit });
    expect(error.field).toBe("input.window");
    expect(error.message).toBe(`input.window must be at most 366 days (got ${shown})`);
  });

  it("rejects more than 366 days in seconds", () => {
    expect(rejectNew({ ...valid, window: 31_622_401, windowUnit: "SECONDS" }).message).toBe(
      "input.window must be at most 366 days (got 31622401 seconds)",
    );
  });
});

describe("validateNewRule burst", () => {
  it("rejects 0", () => {
    const error = rejectNew({ ...valid, algorithm: "TOKEN_BUCKET", burst: 0 });
    expect(error.field).toBe("input.burst");
    expect(error.message).toBe("input.burst must be at least 1 (got 0)");
  });

  it("rejects more than 1_000_000_000", () => {
    expect(rejectNew({ ...valid, burst: 1_000_000_001 }).message).toBe("input.burst must be at most 1000000000 (got 1000000001)");
  });

  it("rejects a fraction", () => {
    expect(rejectNew({ ...valid, burst: 2.5 }).message).toBe("input.burst must be an integer (got 2.5)");
  });
});

describe("validateNewRule method", () => {
  it('rejects "FETCH"', () => {
    const error = rejectNew({ ...valid, method: "FETCH" });
    expect(error.field).toBe("input.method");
    expect(error.message).toBe(`input.method must be one of ${METHODS} (got "FETCH")`);
  });

  it("normalises to upper case", () => {
    expect(validateNewRule({ ...valid, method: "patch" }).method).toBe("PATCH");
  });

  it('rejects ""', () => {
    expect(rejectNew({ ...valid, method: "" }).message).toBe("input.method must not be empty (leave it null to match every method)");
  });

  it("rejects a method that is not a string", () => {
    expect(rejectNew({ ...valid, method: 1 }).message).toBe("input.method must be a string");
  });
});

describe("validateNewRule resource", () => {
  it("keeps a valid glob", () => {
    expect(validateNewRule({ ...valid, resource: "/files/*.pdf" }).resource).toBe("/files/*.pdf");
  });

  it('propagates a missing "/" under input.resource', () => {
    const error = rejectNew({ ...valid, resource: "api/**" });
    expect(error.field).toBe("input.resource");
    expect(error.message).toBe('input.resource must start with "/" (got "api/**")');
  });

  it('propagates "" under input.resource', () => {
    expect(rejectNew({ ...valid, resource: "" }).message).toBe(
      "input.resource must not be empty (leave it null to match every resource)",
    );
  });

  it('propagates "**" inside a segment under input.resource', () => {
    expect(rejectNew({ ...valid, resource: "/a**" }).message).toBe(
      'input.resource uses "**" inside a segment ("a**"); "**" must be a whole segment, as in /api/**',
    );
  });

  it("propagates too many segments under input.resource", () => {
    expect(rejectNew({ ...valid, resource: "/a".repeat(33) }).message).toBe("input.resource must have at most 32 segments");
  });

  it("propagates the limits on what matching a glob may cost under input.resource", () => {
    expect(rejectNew({ ...valid, resource: "/*" + "a".repeat(33) + "*" }).message).toBe(
      'input.resource may have at most 32 characters between two "*" of a segment (got 33)',
    );
    expect(rejectNew({ ...valid, resource: "/**/a/b/c/**" }).message).toBe(
      'input.resource may have at most 2 segments between its first and last "**" (got 3); each is tried against every segment of the path',
    );
  });

  it("applies the same limits to a changed resource", () => {
    expect(validationErrorOf(() => validateRuleChange(existing(), { resource: "/**/a/b/c/**" })).field).toBe("input.resource");
  });

  it("rejects a resource that is not a string", () => {
    expect(rejectNew({ ...valid, resource: ["/a"] }).message).toBe("input.resource must be a string");
  });
});

describe("validateNewRule scope", () => {
  it("sorts the scope into dimension order", () => {
    expect(validateNewRule({ ...valid, scope: ["ENDPOINT", "IP", "TENANT"] }).scope).toEqual(["TENANT", "IP", "ENDPOINT"]);
  });

  it("rejects a dimension listed twice", () => {
    const error = rejectNew({ ...valid, scope: ["USER", "IP", "USER"] });
    expect(error.field).toBe("input.scope");
    expect(error.message).toBe("input.scope lists USER twice");
  });

  it("names the index of an unknown dimension", () => {
    const error = rejectNew({ ...valid, scope: ["USER", "DEVICE"] });
    expect(error.field).toBe("input.scope[1]");
    expect(error.message).toBe('input.scope[1] must be one of TENANT, USER, IP, API_KEY, CLIENT, ENDPOINT (got "DEVICE")');
  });

  it("rejects a scope that is not a list", () => {
    expect(rejectNew({ ...valid, scope: "USER" }).message).toBe("input.scope must be a list of dimensions");
  });
});

describe("validateNewRule enums", () => {
  it.each([
    ["algorithm", "GCRA", "SLIDING_WINDOW_COUNTER, TOKEN_BUCKET, FIXED_WINDOW, SLIDING_WINDOW_LOG, LEAKY_BUCKET, CONCURRENCY"],
    ["windowUnit", "WEEKS", "SECONDS, MINUTES, HOURS, DAYS"],
    ["action", "DROP", "REJECT, THROTTLE, LOG_ONLY"],
    ["failureMode", "MAYBE", "OPEN, CLOSED, LOCAL"],
    ["reach", "WORLDWIDE", "REGIONAL, GLOBAL"],
  ] as const)("rejects %s %s", (field, value, allowed) => {
    const error = rejectNew({ ...valid, [field]: value });
    expect(error.field).toBe(`input.${field}`);
    expect(error.message).toBe(`input.${field} must be one of ${allowed} (got "${value}")`);
  });

  it("takes GLOBAL for the window counters only, whose counts add up across regions", () => {
    for (const algorithm of ["FIXED_WINDOW", "SLIDING_WINDOW_COUNTER"] as const) expect(validateNewRule({ ...valid, algorithm, reach: "GLOBAL" }).reach).toBe("GLOBAL");
    for (const algorithm of ["TOKEN_BUCKET", "LEAKY_BUCKET", "SLIDING_WINDOW_LOG"] as const) {
      const error = rejectNew({ ...valid, algorithm, reach: "GLOBAL" });
      expect(error.field).toBe("input.reach");
      expect(error.message).toBe(`input.reach GLOBAL needs FIXED_WINDOW or SLIDING_WINDOW_COUNTER, whose counts per window add up across regions (got ${algorithm})`);
    }
    expect(validateNewRule(valid).reach).toBe("REGIONAL");
  });

  it("is case-sensitive for enum values", () => {
    expect(rejectNew({ ...valid, action: "reject" }).message).toBe('input.action must be one of REJECT, THROTTLE, LOG_ONLY (got "reject")');
  });

  it("rejects a non-string enum value", () => {
    expect(rejectNew({ ...valid, algorithm: 3 }).message).toBe(
      "input.algorithm must be one of SLIDING_WINDOW_COUNTER, TOKEN_BUCKET, FIXED_WINDOW, SLIDING_WINDOW_LOG, LEAKY_BUCKET, CONCURRENCY (got 3)",
    );
  });
});

describe("validateNewRule priority and enabled", () => {
  it("accepts the 32-bit bounds", () => {
    expect(validateNewRule({ ...valid, priority: 2 ** 31 - 1 }).priority).toBe(2 ** 31 - 1);
    expect(validateNewRule({ ...valid, priority: -(2 ** 31) }).priority).toBe(-(2 ** 31));
  });

  it("rejects a priority above 2^31 - 1", () => {
    expect(rejectNew({ ...valid, priority: 2 ** 31 }).message).toBe("input.priority must be at most 2147483647 (got 2147483648)");
  });

  it("rejects a priority below -2^31", () => {
    expect(rejectNew({ ...valid, priority: -(2 ** 31) - 1 }).message).toBe(
      "input.priority must be at least -2147483648 (got -2147483649)",
    );
  });

  it("rejects an enabled that is not a boolean", () => {
    const error = rejectNew({ ...valid, enabled: "yes" });
    expect(error.field).toBe("input.enabled");
    expect(error.message).toBe("input.enabled must be true or false");
  });
});

describe("validateNewRule SLIDING_WINDOW_LOG", () => {
  it(`accepts a limit of ${RULE_BOUNDS.maxLogLimit}`, () => {
    expect(validateNewRule({ ...valid, algorithm: "SLIDING_WINDOW_LOG", limit: 100_000 }).limit).toBe(100_000);
  });

  it("rejects a limit above 100000", () => {
    const error = rejectNew({ ...valid, algorithm: "SLIDING_WINDOW_LOG", limit: 100_001 });
    expect(error.field).toBe("input.limit");
    expect(error.message).toBe(
      "input.limit must be at most 100000 for SLIDING_WINDOW_LOG, which stores one entry per admitted request; use SLIDING_WINDOW_COUNTER above that",
    );
  });

  it("allows the same limit for SLIDING_WINDOW_COUNTER", () => {
    expect(validateNewRule({ ...valid, algorithm: "SLIDING_WINDOW_COUNTER", limit: 100_001 }).limit).toBe(100_001);
  });
});

describe("validateNewRule CONCURRENCY", () => {
  it("accepts REJECT and LOG_ONLY, and a limit up to the log's bound", () => {
    expect(validateNewRule({ ...valid, algorithm: "CONCURRENCY", limit: RULE_BOUNDS.maxLogLimit }).algorithm).toBe("CONCURRENCY");
    expect(validateNewRule({ ...valid, algorithm: "CONCURRENCY", action: "LOG_ONLY" }).action).toBe("LOG_ONLY");
  });

  it("rejects THROTTLE, which has no time to wait for", () => {
    const error = rejectNew({ ...valid, algorithm: "CONCURRENCY", action: "THROTTLE" });
    expect(error.field).toBe("input.action");
    expect(error.message).toBe(
      "input.action THROTTLE cannot hold a request for CONCURRENCY, whose slots free when requests end, not at a time known ahead; use REJECT or LOG_ONLY",
    );
  });

  it("rejects a limit above the leases one bucket may store", () => {
    const error = rejectNew({ ...valid, algorithm: "CONCURRENCY", limit: RULE_BOUNDS.maxLogLimit + 1 });
    expect(error.field).toBe("input.limit");
    expect(error.message).toBe(`input.limit must be at most ${RULE_BOUNDS.maxLogLimit} for CONCURRENCY, which stores one lease per request in flight`);
  });

  it("rejects GLOBAL, whose regions cannot share leases", () => {
    expect(rejectNew({ ...valid, algorithm: "CONCURRENCY", reach: "GLOBAL" }).field).toBe("input.reach");
  });
});

describe("validateNewRule exactness bound of token and leaky buckets", () => {
  const yearLong = { ...valid, window: 366, windowUnit: "DAYS" } as const;

  it("rejects limit 1e9 per 366 days, naming input.limit when burst is not set", () => {
    const error = rejectNew({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 1_000_000_000 });
    expect(error.field).toBe("input.limit");
    expect(error.message).toBe(`input.limit is too large for a 366 days window: TOKEN_BUCKET ${EXACTNESS}`);
  });

  it("names input.burst when burst is set", () => {
    const error = rejectNew({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 1_000_000_000, burst: 5 });
    expect(error.field).toBe("input.burst");
    expect(error.message).toBe(`input.burst is too large for a 366 days window: TOKEN_BUCKET ${EXACTNESS}`);
  });

  it("applies to LEAKY_BUCKET", () => {
    expect(rejectNew({ ...yearLong, algorithm: "LEAKY_BUCKET", limit: 1_000_000_000 }).message).toBe(
      `input.limit is too large for a 366 days window: LEAKY_BUCKET ${EXACTNESS}`,
    );
  });

  it("accepts the largest limit whose (limit + limit) x window in ms stays within 2^52", () => {
    expect(validateNewRule({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 71_209 }).limit).toBe(71_209);
  });

  it("rejects the next limit", () => {
    expect(rejectNew({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 71_210 }).field).toBe("input.limit");
  });

  it("accepts the largest burst whose (burst + limit) x window in ms stays within 2^52", () => {
    expect(validateNewRule({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 71_209, burst: 71_209 }).burst).toBe(71_209);
  });

  it("rejects the next burst", () => {
    expect(rejectNew({ ...yearLong, algorithm: "TOKEN_BUCKET", limit: 71_209, burst: 71_210 }).field).toBe("input.burst");
  });

  it("shows the window in the rule's own unit", () => {
    expect(rejectNew({ ...valid, window: 8784, windowUnit: "HOURS", algorithm: "TOKEN_BUCKET", limit: 1_000_000 }).message).toBe(
      `input.limit is too large for a 8784 hours window: TOKEN_BUCKET ${EXACTNESS}`,
    );
  });

  it("does not apply to algorithms without fractional tokens", () => {
    expect(validateNewRule({ ...yearLong, algorithm: "FIXED_WINDOW", limit: 1_000_000_000 }).limit).toBe(1_000_000_000);
  });

  it("accepts the largest numbers over a one-second window", () => {
    const spec = validateNewRule({ ...valid, window: 1, algorithm: "TOKEN_BUCKET", limit: 1_000_000_000, burst: 1_000_000_000 });
    expect(spec).toMatchObject({ limit: 1_000_000_000, burst: 1_000_000_000 });
  });
});

describe("validateRuleChange", () => {
  it("keeps every field when the change is empty", () => {
    expect(validateRuleChange(existing(), {})).toEqual(specOf(existing()));
  });

  it("keeps fields the change leaves undefined", () => {
    expect(validateRuleChange(existing(), { limit: undefined, resource: undefined, burst: undefined })).toEqual(specOf(existing()));
  });

  it("changes only the fields given", () => {
    expect(validateRuleChange(existing(), { limit: 50, name: "renamed" })).toEqual({ ...specOf(existing()), limit: 50, name: "renamed" });
  });

  it("clears the resource with null", () => {
    expect(validateRuleChange(existing(), { resource: null }).resource).toBeNull();
  });

  it("clears the method with null", () => {
    expect(validateRuleChange(existing(), { method: null }).method).toBeNull();
  });

  it("clears the burst with null", () => {
    expect(validateRuleChange(existing(), { burst: null }).burst).toBeNull();
  });

  it.each(["limit", "priority", "algorithm", "scope"] as const)("rejects null for %s, which is not nullable", (field) => {
    const error = validationErrorOf(() => validateRuleChange(existing(), { [field]: null }));
    expect(error.field).toBe(`input.${field}`);
    expect(error.message).toBe(`input.${field} cannot be null (leave it out to keep the current value)`);
  });

  it("rejects a change of tenant", () => {
    const error = validationErrorOf(() => validateRuleChange(existing(), { tenantId: "globex" }));
    expect(error.field).toBe("input.tenantId");
    expect(error.message).toBe("input.tenantId cannot change: a rule stays with its tenant");
  });

  it("rejects null for the tenant", () => {
    expect(validationErrorOf(() => validateRuleChange(existing(), { tenantId: null })).field).toBe("input.tenantId");
  });

  it("accepts the rule's own tenant", () => {
    expect(validateRuleChange(existing(), { tenantId: "acme" }).tenantId).toBe("acme");
  });

  it("names fields under the given prefix", () => {
    const error = validationErrorOf(() => validateRuleChange(existing(), { tenantId: "globex" }, "patch"));
    expect(error.field).toBe("patch.tenantId");
  });

  it("validates each changed field", () => {
    expect(validationErrorOf(() => validateRuleChange(existing(), { method: "FETCH" })).message).toBe(
      `input.method must be one of ${METHODS} (got "FETCH")`,
    );
  });

  it("validates the merged rule as a whole: a new algorithm against the kept limit", () => {
    const current = existing({ algorithm: "SLIDING_WINDOW_COUNTER", limit: 200_000, burst: null });
    const error = validationErrorOf(() => validateRuleChange(current, { algorithm: "SLIDING_WINDOW_LOG" }));
    expect(error.field).toBe("input.limit");
  });

  it("validates the merged rule as a whole: a new unit against the kept window", () => {
    const current = existing({ window: 400, windowUnit: "SECONDS" });
    expect(validationErrorOf(() => validateRuleChange(current, { windowUnit: "DAYS" })).message).toBe(
      "input.window must be at most 366 days (got 400 days)",
    );
  });

  it("validates the merged rule as a whole: a longer window against the kept burst", () => {
    const current = existing({ algorithm: "TOKEN_BUCKET", limit: 10, burst: 1_000_000 });
    const error = validationErrorOf(() => validateRuleChange(current, { window: 366, windowUnit: "DAYS" }));
    expect(error.field).toBe("input.burst");
  });

  it("normalises a changed scope into dimension order", () => {
    expect(validateRuleChange(existing(), { scope: ["ENDPOINT", "USER"] }).scope).toEqual(["USER", "ENDPOINT"]);
  });

  it("normalises a changed method to upper case", () => {
    expect(validateRuleChange(existing(), { method: "get" }).method).toBe("GET");
  });

  it("does not modify the current rule", () => {
    const current = existing();
    validateRuleChange(current, { limit: 99, resource: null });
    expect(current).toEqual(existing());
  });
});

describe("specOf", () => {
  it("drops identity and bookkeeping fields", () => {
    const spec = specOf(existing());
    expect(Object.keys(spec).sort()).toEqual(
      [
        "action",
        "algorithm",
        "attributeKeys",
        "autoBan",
        "burst",
        "calendar",
        "enabled",
        "failureMode",
        "limit",
        "method",
        "name",
        "priority",
        "reach",
        "resource",
        "scope",
        "tenantId",
        "when",
        "window",
        "windowUnit",
      ].sort(),
    );
  });
});

describe("checkNewRule (every problem at once, for the rules file)", () => {
  it("collects every failing field in field order, with the same messages validateNewRule throws one by one", () => {
    const input: RuleInput = { tenantId: "", name: "x", scope: ["USER", "PLANET"], limit: 0, window: 1.5, action: "DENY" };
    const checked = checkNewRule(input, "rules[3]");
    expect(checked.ok).toBe(false);
    const errors = checked.ok ? [] : checked.errors;
    expect(errors.map((e) => [e.field, e.message])).toEqual([
      ["rules[3].tenantId", "rules[3].tenantId must not be empty"],
      ["rules[3].scope[1]", 'rules[3].scope[1] must be one of TENANT, USER, IP, API_KEY, CLIENT, ENDPOINT (got "PLANET")'],
      ["rules[3].limit", "rules[3].limit must be at least 1 (got 0)"],
      ["rules[3].window", "rules[3].window must be an integer (got 1.5)"],
      ["rules[3].action", 'rules[3].action must be one of REJECT, THROTTLE, LOG_ONLY (got "DENY")'],
    ]);
    expect(rejectNew(input, "rules[3]").message).toBe(errors[0]!.message);
  });

  it("checks across fields only once every field is valid on its own", () => {
    const checked = checkNewRule({ ...valid, window: 367, windowUnit: "DAYS" });
    expect(checked.ok ? [] : checked.errors.map((e) => e.field)).toEqual(["input.window"]);
  });

  it("returns the spec validateNewRule returns when all is well", () => {
    expect(checkNewRule(valid)).toEqual({ ok: true, value: validateNewRule(valid) });
  });
});

describe("sameSpec", () => {
  it("compares every field, scope by its dimensions in order", () => {
    const spec = validateNewRule({ ...valid, scope: ["USER", "IP"] });
    expect(sameSpec(spec, { ...spec, scope: ["USER", "IP"] })).toBe(true);
    expect(sameSpec(spec, { ...spec, scope: ["USER"] })).toBe(false);
    expect(sameSpec(spec, { ...spec, burst: 3 })).toBe(false);
  });
});

describe("validateNewRule attributes", () => {
  it("keeps attribute keys sorted and conditions sorted by key, so one rule is one spec however it is listed", () => {
    const spec = validateNewRule({
      ...valid,
      attributeKeys: ["route_group", "customer"],
      when: [
        { key: "region", values: ["eu"] },
        { key: "plan", values: ["free", "trial"] },
      ],
    });
    expect(spec.attributeKeys).toEqual(["customer", "route_group"]);
    expect(spec.when).toEqual([
      { key: "plan", values: ["free", "trial"] },
      { key: "region", values: ["eu"] },
    ]);
  });

  it("defaults to no attribute keys and no conditions", () => {
    expect(validateNewRule(valid)).toMatchObject({ attributeKeys: [], when: [] });
  });

  it.each([
    [{ attributeKeys: "plan" }, "input.attributeKeys", "input.attributeKeys must be a list of attribute keys"],
    [{ attributeKeys: ["plan", "plan"] }, "input.attributeKeys", 'input.attributeKeys lists "plan" twice'],
    [{ attributeKeys: ["a:b"] }, "input.attributeKeys[0]", 'input.attributeKeys[0] must be letters, digits, "_", "-" and "." only (got "a:b")'],
    [{ attributeKeys: ["ok", "x|y"] }, "input.attributeKeys[1]", 'input.attributeKeys[1] must be letters, digits, "_", "-" and "." only (got "x|y")'],
    [{ attributeKeys: [""] }, "input.attributeKeys[0]", "input.attributeKeys[0] must be 1 to 64 characters (got 0)"],
    [{ attributeKeys: ["k".repeat(65)] }, "input.attributeKeys[0]", "input.attributeKeys[0] must be 1 to 64 characters (got 65)"],
    [{ attributeKeys: Array.from({ length: 9 }, (_, i) => `k${i}`) }, "input.attributeKeys", "input.attributeKeys must list at most 8 attribute keys (got 9)"],
    [{ when: { key: "plan" } }, "input.when", "input.when must be a list of conditions, each { key, values }"],
    [{ when: ["plan"] }, "input.when[0]", "input.when[0] must be { key, values }"],
    [{ when: [{ key: "plan", values: [] }] }, "input.when[0].values", "input.when[0].values must be a list of one or more values"],
    [{ when: [{ key: "plan", values: ["free", "free"] }] }, "input.when[0].values", 'input.when[0].values lists "free" twice'],
    [{ when: [{ key: "plan", values: [""] }] }, "input.when[0].values[0]", "input.when[0].values[0] must not be empty (leave the attribute out instead)"],
    [{ when: [{ key: "plan", values: ["a\u0000"] }] }, "input.when[0].values[0]", "input.when[0].values[0] must not contain control characters"],
    [{ when: [{ key: "pl an", values: ["x"] }] }, "input.when[0].key", 'input.when[0].key must be letters, digits, "_", "-" and "." only (got "pl an")'],
    [{ when: [{ values: ["x"] }] }, "input.when[0].key", "input.when[0].key is required"],
    [{ when: [{ key: "plan", values: ["x"], value: "y" }] }, "input.when[0].value", "input.when[0].value is not a field of a condition; its fields are key and values"],
    [
      { when: [{ key: "plan", values: ["a"] }, { key: "plan", values: ["b"] }] },
      "input.when",
      'input.when has two conditions on "plan": give one its values',
    ],
    [{ when: [{ key: "plan", values: Array.from({ length: 101 }, (_, i) => `v${i}`) }] }, "input.when[0].values", "input.when[0].values must hold at most 100 values (got 101)"],
    [{ when: Array.from({ length: 9 }, (_, i) => ({ key: `k${i}`, values: ["x"] })) }, "input.when", "input.when must hold at most 8 conditions (got 9)"],
  ] as const)("rejects %j, naming %s", (fields, field, message) => {
    const error = rejectNew({ ...valid, ...fields });
    expect(error.field).toBe(field);
    expect(error.message).toBe(message);
  });
});

describe("autoBan", () => {
  const autoBan = { refusals: 5, withinSeconds: 60, banSeconds: 600 };

  it("takes { refusals, withinSeconds, banSeconds } on a rule whose scope has something to ban, and null for none", () => {
    expect(validateNewRule({ ...valid, scope: ["ENDPOINT", "IP"], autoBan }).autoBan).toEqual(autoBan);
    expect(validateNewRule(valid).autoBan).toBeNull();
  });

  it.each([
    [{ ...autoBan, refusals: 0 }, "input.autoBan.refusals must be at least 1 (got 0)"],
    [{ ...autoBan, withinSeconds: 86_401 }, "input.autoBan.withinSeconds must be at most 86400 (got 86401)"],
    [{ ...autoBan, banSeconds: 1.5 }, "input.autoBan.banSeconds must be an integer (got 1.5)"],
    [{ refusals: 5, withinSeconds: 60 }, "input.autoBan.banSeconds is required"],
    [{ ...autoBan, forever: true }, "input.autoBan.forever is not a field of autoBan; its fields are refusals, withinSeconds and banSeconds"],
    [[autoBan], "input.autoBan must be { refusals, withinSeconds, banSeconds }"],
  ])("rejects %j naming the field", (value, message) => {
    expect(rejectNew({ ...valid, scope: ["USER"], autoBan: value }).message).toBe(message);
  });

  it("needs USER, IP, API_KEY or CLIENT in the scope: that is what it bans", () => {
    const error = rejectNew({ ...valid, scope: ["TENANT", "ENDPOINT"], autoBan });
    expect(error.field).toBe("input.autoBan");
    expect(error.message).toBe("input.autoBan needs a rule whose scope has USER, IP, API_KEY or CLIENT: that is what it bans (got scope [TENANT, ENDPOINT])");
  });

  it("is cleared by a change to null, and compared by value", () => {
    const current = existing({ scope: ["USER"], autoBan });
    expect(validateRuleChange(current, { autoBan: null }).autoBan).toBeNull();
    expect(sameSpec(specOf(current), validateRuleChange(current, { autoBan: { ...autoBan } }))).toBe(true);
    expect(sameSpec(specOf(current), validateRuleChange(current, { autoBan: { ...autoBan, refusals: 6 } }))).toBe(false);
  });
});
