/**
 * The rule editor: every field of createRule's input, labelled, and the API's
 * validation errors shown next to the field they name ("input.limit must be
 * at least 1 (got 0)" under Limit). Creating takes the tenant; editing sends
 * the rule's version as expectedVersion, so that a change made meanwhile by
 * someone else is refused (CONFLICT) instead of overwritten.
 */

import { ApiError, type Api } from "./api.js";
import { field, h, select } from "./dom.js";
import {
  DashboardCreateRuleDocument,
  DashboardUpdateRuleDocument,
  type Action,
  type Algorithm,
  type DashboardRuleFragment,
  type Dimension,
  type FailureMode,
  type Reach,
  type WindowUnit,
} from "./generated/operations.js";

const DIMENSIONS: Dimension[] = ["TENANT", "USER", "IP", "API_KEY", "CLIENT", "ENDPOINT"];
const ALGORITHMS: Algorithm[] = ["SLIDING_WINDOW_COUNTER", "TOKEN_BUCKET", "FIXED_WINDOW", "SLIDING_WINDOW_LOG", "LEAKY_BUCKET", "CONCURRENCY"];
const WINDOW_UNITS: WindowUnit[] = ["SECONDS", "MINUTES", "HOURS", "DAYS"];
const ACTIONS: Action[] = ["REJECT", "THROTTLE", "LOG_ONLY"];
const FAILURE_MODES: FailureMode[] = ["OPEN", "CLOSED", "LOCAL"];
const REACHES: Reach[] = ["REGIONAL", "GLOBAL"];

/** graphql's own refusal of a variable names the field only in its message: `... at "input.limit"; Int cannot represent ...`. */
const VARIABLE_PATH = /at "input\.([A-Za-z]+)/;

export function ruleForm(api: Api, rule: DashboardRuleFragment | null, saved: (rule: DashboardRuleFragment) => void): HTMLFormElement {
  const text = (value: string | null | undefined) => h("input", { type: "text", value: value ?? "", autocomplete: "off" });
  const number = (value: number | null | undefined) => h("input", { type: "number", value: value === null || value === undefined ? "" : String(value), step: "1" });
  const controls = {
    tenantId: text(rule?.tenantId),
    name: text(rule?.name),
    resource: text(rule?.resource),
    method: text(rule?.method),
    algorithm: select(ALGORITHMS, rule?.algorithm ?? "SLIDING_WINDOW_COUNTER"),
    limit: number(rule?.limit),
    window: number(rule?.window ?? 1),
    windowUnit: select(WINDOW_UNITS, rule?.windowUnit ?? "MINUTES"),
    burst: number(rule?.burst),
    action: select(ACTIONS, rule?.action ?? "REJECT"),
    failureMode: select(FAILURE_MODES, rule?.failureMode ?? "OPEN"),
    reach: select(REACHES, rule?.reach ?? "REGIONAL"),
    priority: number(rule?.priority ?? 0),
  };
  if (rule) controls.tenantId.disabled = true;
  const enabled = h("input", { type: "checkbox", checked: rule?.enabled ?? true, id: `enabled-${rule?.id ?? "new"}` });
  const scope = DIMENSIONS.map((dimension) => h("input", { type: "checkbox", value: dimension, checked: rule?.scope.includes(dimension) ?? false }));
  const scopeError = h("p", { className: "field-error", attrs: { "aria-live": "polite" } });
  const formError = h("p", { className: "form-error", attrs: { role: "alert" } });

  const hints: Partial<Record<keyof typeof controls, string>> = {
    tenantId: '"*" applies to every tenant',
    resource: "a glob: /api/v1/*, /api/**; empty: every resource",
    method: "GET, POST…; empty: every method",
    burst: "token bucket capacity, or a leaky bucket's line; empty: the limit",
  };
  const labels: Record<keyof typeof controls, string> = {
    tenantId: "Tenant",
    name: "Name",
    resource: "Resource",
    method: "Method",
    algorithm: "Algorithm",
    limit: "Limit",
    window: "Window",
    windowUnit: "Window unit",
    burst: "Burst",
    action: "Action",
    failureMode: "Failure mode",
    reach: "Reach",
    priority: "Priority",
  };
  const rows = Object.fromEntries(Object.entries(controls).map(([name, control]) => [name, field(labels[name as keyof typeof controls], control, hints[name as keyof typeof controls])]));
  const errors: Record<string, HTMLElement> = { ...Object.fromEntries(Object.entries(rows).map(([name, { error }]) => [name, error])), scope: scopeError };

  const save = h("button", { type: "submit" }, rule ? "Save changes" : "Create rule");
  const form = h(
    "form",
    { className: "rule-form", attrs: { "aria-label": rule ? `Edit rule ${rule.name}` : "New rule" }, noValidate: true },
    ...Object.values(rows).map((r) => r.row),
    h(
      "fieldset",
      { className: "field" },
      h("legend", {}, "Scope (what buckets are keyed by)"),
      h("div", { className: "checks" }, ...scope.map((box) => h("label", {}, box, ` ${box.value}`))),
      scopeError,
    ),
    h("div", { className: "field inline" }, enabled, h("label", { htmlFor: enabled.id }, "Enabled")),
    formError,
    h("div", { className: "actions" }, save, h("p", { className: "hint" }, "Changing rules takes a TENANT_ADMIN key of the rule's tenant, or an ADMIN key.")),
  );

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    for (const error of Object.values(errors)) error.textContent = "";
    for (const control of Object.values(controls)) control.removeAttribute("aria-invalid");
    formError.textContent = "";
    const optionalText = (control: HTMLInputElement) => control.value.trim() || null;
    const optionalNumber = (control: HTMLInputElement) => (control.value.trim() === "" ? null : Number(control.value));
    const fields = {
      name: controls.name.value,
      scope: scope.filter((box) => box.checked).map((box) => box.value as Dimension),
      resource: optionalText(controls.resource),
      method: optionalText(controls.method),
      algorithm: controls.algorithm.value as Algorithm,
      limit: optionalNumber(controls.limit) as number,
      window: optionalNumber(controls.window) as number,
      windowUnit: controls.windowUnit.value as WindowUnit,
      burst: optionalNumber(controls.burst),
      action: controls.action.value as Action,
      failureMode: controls.failureMode.value as FailureMode,
      reach: controls.reach.value as Reach,
      priority: optionalNumber(controls.priority) ?? 0,
      enabled: enabled.checked,
    };
    save.disabled = true;
    const request = rule
      ? api.request(DashboardUpdateRuleDocument, { id: rule.id, input: fields, expectedVersion: rule.version }).then((r) => r.updateRule)
      : api.request(DashboardCreateRuleDocument, { input: { ...fields, tenantId: controls.tenantId.value } }).then((r) => r.createRule);
    request
      .then(saved, (error: unknown) => {
        const name = fieldOf(error);
        const slot = name === null ? undefined : errors[name];
        const message = error instanceof Error ? error.message : String(error);
        if (slot) {
          slot.textContent = message;
          const control = controls[name as keyof typeof controls];
          control?.setAttribute("aria-invalid", "true");
          (control ?? scope[0])?.focus();
        } else {
          formError.textContent = error instanceof ApiError && error.code === "CONFLICT" ? `${message} Reload the rule to see the change made meanwhile.` : message;
        }
      })
      .finally(() => (save.disabled = false));
  });
  return form;
}

/** The input field an API error is about ("input.limit" → "limit"), or null for an error of the whole request. */
function fieldOf(error: unknown): string | null {
  if (!(error instanceof ApiError)) return null;
  if (error.field?.startsWith("input.")) return error.field.slice("input.".length).split(/[.[]/)[0]!;
  return VARIABLE_PATH.exec(error.message)?.[1] ?? null;
}
