/** The rules file: reading with the line and field of every problem, planning an import, and writing an export that reads back the same. */

import { describe, expect, it } from "vitest";
import type { ListEntry } from "../../../src/domain/access-list.js";
import type { Rule } from "../../../src/domain/rule.js";
import { describeProblem, planImport } from "../../../src/engine/rules/rule-import.js";
import { readRulesFile, writeRulesFile } from "../../../src/engine/rules/rules-file.js";
import { makeNonDefaultRuleSpec, makeRule } from "../../support/domain-factory.js";
import { aliasBomb } from "../../harness/hostile-input.js";

let ids = 0;
const newId = () => `new-${++ids}`;

/** The problems of a file as "line:column field: message". */
function problemsOf(text: string, stored: readonly Rule[] = []): string[] {
  return planImport(text, stored, newId).problems.map((p) => `${p.line}:${p.column} ${p.field}: ${p.message}`);
}

describe("reading a rules file", () => {
  it("reads each entry's fields with the line it starts on", () => {
    const file = readRulesFile(`rules:
  - tenantId: acme
    name: per-user
    scope: [USER]
    limit: 5
    window: 1
    windowUnit: MINUTES
  - {tenantId: "*", name: global, limit: 100, window: 1, burst: null}
`);
    expect(file.problems).toEqual([]);
    expect(file.entries).toEqual([
      { index: 0, position: { line: 2, column: 5 }, input: { tenantId: "acme", name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" } },
      { index: 1, position: { line: 8, column: 5 }, input: { tenantId: "*", name: "global", limit: 100, window: 1, burst: null } },
    ]);
  });

  it.each([
    ["an empty file", "", ["1:1 null: the file is empty: it must hold `rules:`, a list of rules"]],
    ["a list at the top", "- a\n", ["1:1 null: the file is not a mapping: it must hold `rules:`, a list of rules"]],
    ["no rules", "limits: []\n", ["1:1 limits: limits is not a field of a rules file: it holds only `rules:` and `lists:`", "1:1 rules: rules is required: a list of rules (use [] for none)"]],
    ["rules that are not a list", "rules: 5\n", ["1:8 rules: rules must be a list of rules (use [] for none)"]],
    ["an entry that is not a mapping", "rules:\n  - 5\n", ["2:5 rules[0]: rules[0] must be a mapping of rule fields"]],
    ["a YAML syntax error", "rules:\n  - name: [a\n", ["3:1 null: Flow sequence in block collection must be sufficiently indented and end with a ]"]],
    ["a key given twice", "rules:\n  - name: a\n    name: b\n", ["3:5 null: Map keys must be unique"]],
  ])("reports %s with its line", (_, text, expected) => {
    expect(problemsOf(text)).toEqual(expected);
  });

  it("reports a YAML alias bomb (a billion laughs) with its line and column, and leaves its entry out of the plan", () => {
    const plan = planImport(aliasBomb("acme"), [], newId);
    expect(plan.problems.map((p) => `${p.line}:${p.column} ${p.field}: ${p.message}`)).toEqual([
      "1:1 laughs: laughs is not a field of a rules file: it holds only `rules:` and `lists:`",
      "7:12 rules[0].scope: rules[0].scope cannot be read: Excessive alias count indicates a resource exhaustion attack",
    ]);
    expect(plan.rules.map((r) => r.name)).toEqual(["fine"]);
  });

  it("reports an alias to an anchor that is not set with its line and column", () => {
    expect(problemsOf("rules:\n  - tenantId: *nowhere\n    name: a\n    limit: 1\n    window: 1\n")).toEqual([
      "2:15 rules[0].tenantId: rules[0].tenantId cannot be read: Unresolved alias (the anchor must be set before the alias): nowhere",
    ]);
  });

  it("accepts `rules: []`", () => {
    expect(planImport("rules: []\n", [], newId)).toEqual({ entries: 0, rules: [], lists: { add: [], unchanged: [] }, problems: [] });
  });
});

describe("planning an import", () => {
  const THREE_MISTAKES = `rules:
  - tenantId: acme
    name: ok
    limit: 5
    window: 1
  - tenantId: acme
    name: zero
    limit: 0
    window: 1
  - tenantId: acme
    name: bad-scope
    scope: [USER, PLANET]
    limit: 5
    window: 1
    algorithm: TOKEN_BUCKET
    burst: 0
`;

  it("reports every problem of every entry with its line, column and field, not just the first", () => {
    expect(problemsOf(THREE_MISTAKES)).toEqual([
      "8:12 rules[1].limit: rules[1].limit must be at least 1 (got 0)",
      '12:19 rules[2].scope[1]: rules[2].scope[1] must be one of TENANT, USER, IP, API_KEY, CLIENT, ENDPOINT (got "PLANET")',
      "16:12 rules[2].burst: rules[2].burst must be at least 1 (got 0)",
    ]);
  });

  it("points a missing field at the entry that lacks it, and names an unknown field", () => {
    expect(problemsOf("rules:\n  - tenantId: acme\n    name: x\n    window: 1\n    limits: 5\n")).toEqual([
      "5:5 rules[0].limits: rules[0].limits is not a rule field; the fields are tenantId, name, scope, attributeKeys, when, resource, method, algorithm, limit, window, windowUnit, calendar, burst, action, failureMode, reach, priority, enabled, autoBan, overrides",
      "2:5 rules[0].limit: rules[0].limit is required",
    ]);
  });

  it("refuses a rule named twice for one tenant, pointing at the second", () => {
    expect(problemsOf("rules:\n  - {tenantId: a, name: x, limit: 1, window: 1}\n  - {tenantId: b, name: x, limit: 1, window: 1}\n  - {tenantId: a, name: x, limit: 2, window: 1}\n")).toEqual([
      '4:25 rules[2].name: rules[2].name repeats the rule "x" of tenant "a" of rules[0] (line 2): a rule is identified by its tenant and name',
    ]);
  });

  it("sorts entries into created, updated and unchanged by (tenantId, name), leaving out fields meaning their default", () => {
    const same = makeRule({ tenantId: "acme", name: "same", algorithm: "SLIDING_WINDOW_COUNTER", limit: 5, window: 1 });
    const changed = makeRule({ tenantId: "acme", name: "changed", algorithm: "SLIDING_WINDOW_COUNTER", limit: 5, window: 1, version: 4 });
    const untouched = makeRule({ tenantId: "acme", name: "not in the file" });
    const plan = planImport(
      `rules:
  - {tenantId: acme, name: same, limit: 5, window: 1}
  - {tenantId: acme, name: changed, limit: 6, window: 1}
  - {tenantId: other, name: same, limit: 5, window: 1}
`,
      [same, changed, untouched],
      () => "fresh",
    );
    expect(plan.problems).toEqual([]);
    expect(plan.rules.map((r) => [r.outcome, r.tenantId, r.name, r.line, r.write?.kind ?? null])).toEqual([
      ["unchanged", "acme", "same", 2, null],
      ["updated", "acme", "changed", 3, "update"],
      ["created", "other", "same", 4, "create"],
    ]);
    expect(plan.rules[1]!.write).toMatchObject({ id: changed.id, version: 4, spec: { limit: 6 } });
    expect(plan.rules[2]!.write).toMatchObject({ id: "fresh" });
  });

  it("describes a problem as a compiler would", () => {
    expect(describeProblem("rules.yaml", { line: 8, column: 12, field: "rules[1].limit", message: "rules[1].limit must be at least 1 (got 0)" })).toBe(
      "rules.yaml:8:12: rules[1].limit must be at least 1 (got 0)",
    );
  });
});

describe("writing a rules file", () => {
  const rules = [
    makeRule({ tenantId: "acme", name: "plain", algorithm: "SLIDING_WINDOW_COUNTER", limit: 5, window: 1 }),
    makeRule({ ...makeNonDefaultRuleSpec(), tenantId: "*", name: "global: every tenant" }),
  ];

  it("sorts by tenant and name and writes only what differs from the defaults", () => {
    expect(writeRulesFile(rules)).toBe(`# Floodgate rules: import with importRules or \`npm run rules -- import FILE\`; README.md describes the fields.

rules:
  - tenantId: "*"
    name: "global: every tenant"
    scope: [USER, IP]
    attributeKeys: [plan, route_group]
    when:
      - key: region
        values: [eu, us]
    resource: /api/**
    method: POST
    algorithm: TOKEN_BUCKET
    limit: 100
    window: 1
    windowUnit: MINUTES
    burst: 20
    action: LOG_ONLY
    failureMode: LOCAL
    priority: -3
    enabled: false
    autoBan:
      refusals: 5
      withinSeconds: 60
      banSeconds: 600

  - tenantId: acme
    name: plain
    limit: 5
    window: 1
`);
  });

  it("reads back as the same rules: an import of an export changes nothing", () => {
    const plan = planImport(writeRulesFile(rules), rules, newId);
    expect(plan.problems).toEqual([]);
    expect(plan.rules.map((r) => r.outcome)).toEqual(["unchanged", "unchanged"]);
  });

  it("writes a calendar on one line, weekStartsOn only for a WEEK, and reads it back as the same rule", () => {
    const calendarRules = [
      makeRule({ tenantId: "acme", name: "monthly", limit: 1000, window: 1, calendar: { period: "MONTH", timeZone: "Europe/Berlin", weekStartsOn: null } }),
      makeRule({ tenantId: "acme", name: "weekly", limit: 100, window: 1, calendar: { period: "WEEK", timeZone: "America/New_York", weekStartsOn: "SUNDAY" } }),
    ];
    const text = writeRulesFile(calendarRules);
    expect(text).toContain(`  - tenantId: acme
    name: monthly
    algorithm: FIXED_WINDOW
    limit: 1000
    window: 1
    calendar: {period: MONTH, timeZone: Europe/Berlin}
`);
    expect(text).toContain("    calendar: {period: WEEK, timeZone: America/New_York, weekStartsOn: SUNDAY}\n");
    const plan = planImport(text, calendarRules, newId);
    expect(plan.problems).toEqual([]);
    expect(plan.rules.map((r) => r.outcome)).toEqual(["unchanged", "unchanged"]);
    const moved = planImport(text.replace("Europe/Berlin", "Europe/Paris"), calendarRules, newId);
    expect(moved.rules.map((r) => r.outcome)).toEqual(["updated", "unchanged"]);
  });

  it("reports a calendar's unknown time zone with its line and field", () => {
    const text = "rules:\n  - tenantId: acme\n    name: monthly\n    algorithm: FIXED_WINDOW\n    limit: 5\n    window: 1\n    calendar: { period: MONTH, timeZone: Mars/Base }\n";
    expect(problemsOf(text)).toEqual(['7:42 rules[0].calendar.timeZone: rules[0].calendar.timeZone must be an IANA time zone such as "Europe/Berlin" (got "Mars/Base")']);
  });

  it("writes `rules: []` when there are none", () => {
    expect(writeRulesFile([])).toContain("rules: []\n");
  });
});

describe("a rules file's lists", () => {
  const entry = (fields: Partial<ListEntry> & Pick<ListEntry, "tenantId" | "list" | "kind" | "value">): ListEntry => ({ id: `e-${++ids}`, note: null, expiresAt: null, createdAt: new Date(0), createdBy: "k1", ...fields });
  const stored = [
    entry({ tenantId: "acme", list: "DENY", kind: "IP", value: "10.0.0.0/8", note: "abuse" }),
    entry({ tenantId: "*", list: "ALLOW", kind: "USER_AGENT", value: "*uptime-monitor*" }),
    entry({ tenantId: "acme", list: "ALLOW", kind: "API_KEY", value: "sha256:AAAAAAAAAAAAAAAAAAAAAA" }),
  ];

  it("writes the entries after the rules, sorted, without empty notes, and reads them back as the same entries", () => {
    const text = writeRulesFile([], new Map(), stored);
    expect(text).toBe(`# Floodgate rules: import with importRules or \`npm run rules -- import FILE\`; README.md describes the fields.

rules: []

lists:
  - tenantId: "*"
    list: ALLOW
    kind: USER_AGENT
    value: "*uptime-monitor*"
  - tenantId: acme
    list: ALLOW
    kind: API_KEY
    value: sha256:AAAAAAAAAAAAAAAAAAAAAA
  - tenantId: acme
    list: DENY
    kind: IP
    value: 10.0.0.0/8
    note: abuse
`);
    expect(planImport(text, [], newId, new Map(), new Date(), stored)).toMatchObject({ problems: [], lists: { add: [], unchanged: expect.arrayContaining([expect.objectContaining({ value: "10.0.0.0/8" })]) } });
    expect(planImport(text, [], newId, new Map(), new Date(), stored).lists.unchanged).toHaveLength(3);
  });

  it("leaves `lists` out of a file with no entries, as before there were lists", () => {
    expect(writeRulesFile([], new Map(), [])).not.toContain("lists");
  });

  it("adds what the lists do not hold yet, canonical, and leaves the rest alone", () => {
    const plan = planImport("rules: []\nlists:\n  - {tenantId: acme, list: DENY, kind: IP, value: '10.0.0.0/8'}\n  - {tenantId: acme, list: DENY, kind: IP, value: '2001:DB8::/32'}\n", [], newId, new Map(), new Date(), stored);
    expect(plan.problems).toEqual([]);
    expect(plan.lists.add).toEqual([{ tenantId: "acme", list: "DENY", kind: "IP", value: "2001:db8::/32", note: null, expiresAt: null }]);
    expect(plan.lists.unchanged).toHaveLength(1);
  });

  it("reports each bad entry with its line, column and field", () => {
    expect(
      problemsOf(`rules: []
lists:
  - tenantId: acme
    list: DENY
    kind: IP
    value: 10.1.2.3/8
  - {tenantId: acme, list: DENY, kind: HOST, value: x}
  - {tenantId: acme, list: DENY, kind: USER, value: u, reason: spam}
  - {tenantId: acme, list: DENY, kind: USER, value: u}
  - {tenantId: acme, list: DENY, kind: USER, value: u}
  - just text
`),
    ).toEqual([
      // The file's shape first, then what the entries hold.
      "8:56 lists[2].reason: lists[2].reason is not an access list entry field; the fields are tenantId, list, kind, value, note, expiresAt",
      "11:5 lists[5]: lists[5] must be a mapping of access list entry fields",
      "6:12 lists[0].value: lists[0].value has address bits set past its /8: give the block's network address",
      '7:40 lists[1].kind: lists[1].kind must be one of IP, USER, API_KEY, USER_AGENT (got "HOST")',
      "10:53 lists[4].value: lists[4].value repeats the entry of lists[3] (line 9): an entry is identified by its tenant, list, kind and value",
    ]);
    expect(problemsOf("rules: []\nlists: {}\n")).toEqual(["2:8 lists: lists must be a list of access list entries (leave it out, or use [], for none)"]);
  });
});
