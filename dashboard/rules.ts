/**
 * Rules: the list with a search, a rule's page (its editor, what it would
 * refuse if it is a shadow rule and the promotion to enforcement, its history
 * with each change's diff and a rollback to any earlier version), and the
 * form for a new rule.
 */

import type { Api } from "./api.js";
import { totals } from "./chart.js";
import { field, formatNumber, formatTime, h, show } from "./dom.js";
import {
  DashboardPromoteRuleDocument,
  DashboardRollbackRuleDocument,
  DashboardRuleHistoryDocument,
  DashboardRuleUsageDocument,
  type DashboardRuleFragment,
  type DashboardRuleHistoryQuery,
} from "./generated/operations.js";
import { ruleForm } from "./rule-form.js";
import type { View } from "./view.js";

type Revision = DashboardRuleHistoryQuery["ruleHistory"][number];

/** The fields a diff compares, in the editor's order (version and times change with every revision, and say nothing of their own). */
const DIFFED: (keyof DashboardRuleFragment)[] = ["name", "scope", "resource", "method", "algorithm", "limit", "window", "windowUnit", "burst", "action", "failureMode", "reach", "priority", "enabled"];

export interface RulesNavigation {
  /** Opens a rule's page (null: the new rule form) with the rules loaded afresh, also when it is the page shown. */
  open(id: string | null): void;
}

export function rulesList(rules: readonly DashboardRuleFragment[], nav: RulesNavigation): View {
  const search = h("input", { type: "search", placeholder: "name, tenant, resource or action", autocomplete: "off" });
  const body = h("tbody");
  const count = h("p", { className: "muted", attrs: { role: "status" } });
  const render = () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = rules.filter((r) => words.every((w) => [r.name, r.tenantId, r.resource ?? "", r.action, r.algorithm].some((v) => v.toLowerCase().includes(w))));
    show(
      body,
      ...shown.map((r) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: `#rules/${encodeURIComponent(r.id)}` }, r.name)),
          h("td", {}, r.tenantId),
          h("td", {}, `${formatNumber(r.limit)} / ${r.window} ${r.windowUnit.toLowerCase()}`),
          h("td", {}, h("span", { className: `badge ${r.action.toLowerCase()}` }, r.action)),
          h("td", {}, r.resource ?? "every resource"),
          h("td", {}, r.enabled ? "yes" : "no"),
          h("td", {}, h("a", { href: `#usage/${encodeURIComponent(r.id)}` }, "usage")),
        ),
      ),
    );
    count.textContent = `${shown.length} of ${rules.length} rules`;
  };
  search.addEventListener("input", render);
  render();
  const create = h("button", { type: "button" }, "New rule");
  create.addEventListener("click", () => nav.open(null));
  return {
    element: h(
      "section",
      { attrs: { "aria-labelledby": "rules-title" } },
      h("h2", { id: "rules-title" }, "Rules"),
      h("div", { className: "filters" }, field("Search rules", search).row, h("div", { className: "actions" }, create)),
      count,
      h(
        "div",
        { className: "panel scroll" },
        h(
          "table",
          {},
          h("thead", {}, h("tr", {}, ...["Name", "Tenant", "Limit", "Action", "Resource", "Enabled", ""].map((c) => h("th", {}, c)))),
          body,
        ),
      ),
    ),
    stop: () => undefined,
  };
}

export function newRuleView(api: Api, nav: RulesNavigation): View {
  return {
    element: h(
      "section",
      { attrs: { "aria-labelledby": "new-rule-title" } },
      h("p", {}, h("a", { href: "#rules" }, "← Rules")),
      h("h2", { id: "new-rule-title" }, "New rule"),
      h("div", { className: "panel" }, ruleForm(api, null, (rule) => nav.open(rule.id))),
    ),
    stop: () => undefined,
  };
}

export function ruleView(api: Api, rule: DashboardRuleFragment, nav: RulesNavigation, report: (error: unknown) => void): View {
  const history = h("ol", { className: "history", attrs: { "aria-label": "Changes, newest first" } });
  const shadowPanel = h("div");
  const reloadAndOpen = () => nav.open(rule.id);

  const loadHistory = async () => {
    try {
      const { ruleHistory } = await api.request(DashboardRuleHistoryDocument, { id: rule.id });
      show(history, ...[...ruleHistory].reverse().map((revision) => revisionItem(revision)));
    } catch (error) {
      report(error);
    }
  };

  const revisionItem = (revision: Revision) => {
    const changes = diff(revision.before ?? null, revision.after ?? null);
    const rollback =
      revision.after && revision.version !== rule.version
        ? h("button", { type: "button", className: "secondary", onclick: () => void rollbackTo(revision.version) }, `Roll back to version ${revision.version}`)
        : null;
    return h(
      "li",
      {},
      h("p", {}, h("strong", {}, `Version ${revision.version}`), ` ${revision.kind.toLowerCase()} at ${formatTime(revision.at)}`, revision.actor ? ` by ${revision.actor}` : "", revision.note ? ` — ${revision.note}` : ""),
      changes.length > 0
        ? h("table", { className: "diff" }, h("thead", {}, h("tr", {}, h("th", {}, "Field"), h("th", {}, "Before"), h("th", {}, "After"))), h("tbody", {}, ...changes.map(([name, before, after]) => h("tr", {}, h("td", {}, name), h("td", { className: "removed" }, before), h("td", { className: "added" }, after)))))
        : null,
      rollback,
    );
  };

  const rollbackTo = async (version: number) => {
    try {
      await api.request(DashboardRollbackRuleDocument, { id: rule.id, version });
      reloadAndOpen();
    } catch (error) {
      report(error);
    }
  };

  const loadShadow = async () => {
    if (rule.action !== "LOG_ONLY") return;
    try {
      const { ruleUsage } = await api.request(DashboardRuleUsageDocument, { ruleId: rule.id, since: new Date(Date.now() - 3_600_000).toISOString(), step: 60 });
      const sum = totals(ruleUsage);
      const promote = h("button", { type: "button" }, "Promote to enforcement (REJECT)");
      promote.addEventListener("click", async () => {
        try {
          await api.request(DashboardPromoteRuleDocument, { id: rule.id, expectedVersion: rule.version });
          reloadAndOpen();
        } catch (error) {
          report(error);
        }
      });
      show(
        shadowPanel,
        h(
          "div",
          { className: "panel notice" },
          h("h3", {}, "Shadow mode"),
          h("p", {}, `In the last hour this rule would have refused ${formatNumber(sum.shadowRefused)} of ${formatNumber(sum.allowed + sum.shadowRefused)} checks it decided. Promoting it refuses what it would have refused.`),
          promote,
        ),
      );
    } catch (error) {
      report(error);
    }
  };

  void loadHistory();
  void loadShadow();
  return {
    element: h(
      "section",
      { attrs: { "aria-labelledby": "rule-title" } },
      h("p", {}, h("a", { href: "#rules" }, "← Rules"), " · ", h("a", { href: `#usage/${encodeURIComponent(rule.id)}` }, "Usage of this rule")),
      h("h2", { id: "rule-title" }, rule.name, h("span", { className: "muted" }, ` ${rule.tenantId}, version ${rule.version}`)),
      shadowPanel,
      h("div", { className: "columns" }, h("div", { className: "panel" }, h("h3", {}, "Edit"), ruleForm(api, rule, reloadAndOpen)), h("div", { className: "panel" }, h("h3", {}, "History"), history)),
    ),
    stop: () => undefined,
  };
}

/** Each field that differs between two versions: its name, the value before and after ("—" for none). */
function diff(before: DashboardRuleFragment | null, after: DashboardRuleFragment | null): [string, string, string][] {
  const shown = (rule: DashboardRuleFragment | null, name: keyof DashboardRuleFragment) => {
    const value = rule?.[name];
    if (value === null || value === undefined) return "—";
    return Array.isArray(value) ? (value.length === 0 ? "[]" : value.join(", ")) : String(value);
  };
  return DIFFED.map((name): [string, string, string] => [name, shown(before, name), shown(after, name)]).filter(([, b, a]) => b !== a);
}
