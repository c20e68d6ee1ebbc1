/**
 * Rules as code from the page: a YAML file is first checked with a dry run
 * (what it would create, update or leave alone, and every problem with its
 * line and field), and can be applied only once the dry run of that very text
 * found it valid. Export shows a tenant's rules as a file and offers it as a
 * download.
 */

import type { Api } from "./api.js";
import { field, h, show } from "./dom.js";
import { DashboardExportRulesDocument, DashboardImportRulesDocument, type DashboardImportRulesMutation } from "./generated/operations.js";
import type { View } from "./view.js";

type Report = DashboardImportRulesMutation["importRules"];

export function rulesFileView(api: Api, imported: () => Promise<void>, report: (error: unknown) => void): View {
  const file = h("input", { type: "file", accept: ".yaml,.yml,text/yaml" });
  const yaml = h("textarea", { rows: 14, spellcheck: false, placeholder: "rules:\n  - tenantId: acme\n    name: per-user\n    limit: 5\n    window: 1\n    windowUnit: MINUTES" });
  const dryRun = h("button", { type: "button" }, "Dry run");
  const apply = h("button", { type: "button", disabled: true }, "Apply");
  const result = h("div", { attrs: { "aria-live": "polite" } });
  let checked: string | null = null;

  file.addEventListener("change", async () => {
    const chosen = file.files?.[0];
    if (chosen) yaml.value = await chosen.text();
    invalidate();
  });
  const invalidate = () => {
    checked = null;
    apply.disabled = true;
  };
  yaml.addEventListener("input", invalidate);

  const run = async (asDryRun: boolean) => {
    const text = yaml.value;
    try {
      const { importRules } = await api.request(DashboardImportRulesDocument, { yaml: text, dryRun: asDryRun });
      show(result, importReport(importRules));
      checked = asDryRun && importRules.invalid.length === 0 ? text : null;
      apply.disabled = checked === null;
      if (importRules.applied) await imported();
    } catch (error) {
      report(error);
    }
  };
  dryRun.addEventListener("click", () => void run(true));
  apply.addEventListener("click", () => void run(false));

  const tenant = h("input", { type: "text", placeholder: "your tenant, or every tenant for an ADMIN", autocomplete: "off" });
  const exported = h("textarea", { rows: 14, readOnly: true, spellcheck: false });
  const exportButton = h("button", { type: "button" }, "Export");
  const download = h("a", { className: "download", hidden: true }, "Download rules.yaml");
  exportButton.addEventListener("click", async () => {
    try {
      const { exportRules } = await api.request(DashboardExportRulesDocument, { tenantId: tenant.value.trim() || null });
      exported.value = exportRules;
      if (download.href) URL.revokeObjectURL(download.href);
      download.href = URL.createObjectURL(new Blob([exportRules], { type: "text/yaml" }));
      download.download = `rules${tenant.value.trim() ? `-${tenant.value.trim()}` : ""}.yaml`;
      download.hidden = false;
    } catch (error) {
      report(error);
    }
  });

  return {
    element: h(
      "section",
      { attrs: { "aria-labelledby": "file-title" } },
      h("h2", { id: "file-title" }, "Import and export"),
      h(
        "div",
        { className: "columns" },
        h(
          "div",
          { className: "panel" },
          h("h3", {}, "Import a rules file"),
          field("YAML file", file).row,
          field("Rules (YAML)", yaml, "A dry run checks the whole file and writes nothing; Apply writes it in one transaction, once a dry run found it valid.").row,
          h("div", { className: "actions" }, dryRun, apply),
          result,
        ),
        h("div", { className: "panel" }, h("h3", {}, "Export"), field("Tenant", tenant).row, h("div", { className: "actions" }, exportButton, download), field("Exported rules", exported).row),
      ),
    ),
    stop: () => {
      if (download.href) URL.revokeObjectURL(download.href);
    },
  };
}

function importReport(report: Report): HTMLElement {
  const names = (entries: Report["created"]) => entries.map((e) => `${e.name} (${e.tenantId}, line ${e.line})`).join(", ");
  const heading = report.invalid.length > 0 ? "The file is invalid: nothing was written." : report.applied ? "Applied." : "Dry run: the file is valid, nothing was written yet.";
  return h(
    "div",
    { className: `report ${report.invalid.length > 0 ? "invalid" : "valid"}`, attrs: { role: "status" } },
    h("p", {}, h("strong", {}, heading)),
    h(
      "dl",
      {},
      h("dt", {}, report.dryRun ? "Would create" : "Created"),
      h("dd", {}, `${report.created.length}${report.created.length ? `: ${names(report.created)}` : ""}`),
      h("dt", {}, report.dryRun ? "Would update" : "Updated"),
      h("dd", {}, `${report.updated.length}${report.updated.length ? `: ${names(report.updated)}` : ""}`),
      h("dt", {}, "Unchanged"),
      h("dd", {}, String(report.unchanged.length)),
    ),
    report.invalid.length > 0
      ? h("ul", { className: "problems" }, ...report.invalid.map((p) => h("li", {}, `line ${p.line ?? "?"}${p.column ? `, column ${p.column}` : ""}${p.field ? `, ${p.field}` : ""}: ${p.message}`)))
      : null,
  );
}
