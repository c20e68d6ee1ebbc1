/** Usage over time: one rule's allowed, refused and shadow-refused checks per step, across every instance, refreshed every few seconds. */

import type { Api } from "./api.js";
import { usageChart, usageTotals } from "./chart.js";
import { field, h, select, show } from "./dom.js";
import { DashboardRuleUsageDocument, type DashboardRuleFragment } from "./generated/operations.js";
import type { View } from "./view.js";

const REFRESH_MS = 5_000;
const PERIODS: Record<string, { lookbackMs: number; step: number; label: string }> = {
  "1h": { lookbackMs: 3_600_000, step: 60, label: "last hour, per minute" },
  "6h": { lookbackMs: 6 * 3_600_000, step: 600, label: "last 6 hours, per 10 minutes" },
};

export function usageView(api: Api, rules: readonly DashboardRuleFragment[], selected: string | null, report: (error: unknown) => void): View {
  const rule = select([["", "choose a rule"], ...rules.map((r): [string, string] => [r.id, `${r.name} (${r.tenantId})`])], selected ?? rules[0]?.id ?? "");
  const period = select(Object.entries(PERIODS).map(([value, { label }]): [string, string] => [value, label]), "1h");
  const chart = h("div", { className: "chart-box", attrs: { "aria-live": "polite" } });
  const refresh = async () => {
    if (rule.value === "") return show(chart, h("p", { className: "muted" }, rules.length === 0 ? "No rules yet: create one under Rules." : "Choose a rule."));
    const { lookbackMs, step } = PERIODS[period.value]!;
    try {
      const { ruleUsage } = await api.request(DashboardRuleUsageDocument, { ruleId: rule.value, since: new Date(Date.now() - lookbackMs).toISOString(), step });
      const name = rule.selectedOptions[0]?.textContent ?? "rule";
      show(chart, usageChart(ruleUsage, `Usage of ${name}, ${PERIODS[period.value]!.label}`), usageTotals(ruleUsage));
    } catch (error) {
      report(error);
    }
  };
  for (const control of [rule, period]) control.addEventListener("change", () => void refresh());
  const timer = setInterval(() => void refresh(), REFRESH_MS);
  void refresh();
  return {
    element: h(
      "section",
      { attrs: { "aria-labelledby": "usage-title" } },
      h("h2", { id: "usage-title" }, "Usage"),
      h("form", { className: "filters", onsubmit: (e: Event) => e.preventDefault() }, field("Rule", rule).row, field("Period", period).row),
      h("div", { className: "panel" }, chart),
    ),
    stop: () => clearInterval(timer),
  };
}
