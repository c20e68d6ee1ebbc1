/**
 * The operators' dashboard: sign in with an API key, then Live, Usage, Rules
 * and Import/Export, one screen at a time by the address's hash (#live,
 * #usage/<rule id>, #rules, #rules/<rule id>, #rules/new, #file), so that the
 * browser's back button and links work. Every failure is shown in the error
 * region, never as a blank page.
 */

import { Api, ApiError } from "./api.js";
import { field, h, show } from "./dom.js";
import { DashboardHealthDocument, DashboardRulesDocument, type DashboardRuleFragment } from "./generated/operations.js";
import { healthBanner } from "./health.js";
import { liveView } from "./live.js";
import { newRuleView, ruleView, rulesList, type RulesNavigation } from "./rules.js";
import { rulesFileView } from "./rules-file.js";
import { forgetToken, saveToken, savedToken } from "./session.js";
import { usageView } from "./usage.js";
import type { View } from "./view.js";

const root = document.getElementById("app")!;

function signIn(message = ""): void {
  const token = h("input", { type: "password", autocomplete: "off", required: true });
  const { row, error } = field("API key", token, "A key of any role: VIEWER watches; TENANT_ADMIN or ADMIN may also edit rules. It is kept for this tab only.");
  error.textContent = message;
  const form = h("form", { className: "panel sign-in", attrs: { "aria-labelledby": "sign-in-title" } }, h("h1", { id: "sign-in-title" }, "Floodgate"), row, h("div", { className: "actions" }, h("button", { type: "submit" }, "Sign in")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const api = new Api(token.value.trim());
    try {
      await api.request(DashboardHealthDocument, {});
      saveToken(token.value.trim());
      start(api);
    } catch (failure) {
      error.textContent = failure instanceof ApiError && failure.code === "UNAUTHENTICATED" ? "This key is not valid." : failure instanceof Error ? failure.message : String(failure);
      token.focus();
    }
  });
  show(root, h("main", { className: "centered" }, form));
  token.focus();
}

function start(api: Api): void {
  const banner = h("div", { className: "banners", attrs: { role: "status" } });
  const instances = h("span", { className: "muted" });
  const errors = h("div", { className: "errors", attrs: { role: "alert" } });
  const main = h("main", { id: "main", tabIndex: -1 });
  const signOut = h("button", { type: "button", className: "secondary" }, "Sign out");
  const tabs = (
    [
      ["#live", "Live"],
      ["#usage", "Usage"],
      ["#rules", "Rules"],
      ["#file", "Import / export"],
    ] as const
  ).map(([href, label]) => h("a", { href }, label));
  show(
    root,
    h("a", { href: "#main", className: "skip" }, "Skip to content"),
    h("header", {}, h("h1", {}, "Floodgate"), h("nav", { attrs: { "aria-label": "Screens" } }, ...tabs), instances, signOut),
    banner,
    errors,
    main,
  );

  const report = (error: unknown) => {
    if (error instanceof ApiError && error.code === "UNAUTHENTICATED") return stop("Your key is no longer valid: sign in again.");
    const message = error instanceof Error ? error.message : String(error);
    const item = h("p", { className: "error" }, message, " ");
    item.append(h("button", { type: "button", className: "link", onclick: () => item.remove() }, "Dismiss"));
    errors.prepend(item);
    while (errors.childElementCount > 3) errors.lastElementChild!.remove();
  };

  let rules: DashboardRuleFragment[] = [];
  let current: View | null = null;
  const reload = async () => {
    try {
      rules = (await api.request(DashboardRulesDocument, {})).rules;
    } catch (error) {
      report(error);
    }
  };
  const go = (hash: string) => {
    if (location.hash === hash) void route();
    else location.hash = hash;
  };
  const nav: RulesNavigation = { open: (id) => go(id === null ? "#rules/new" : `#rules/${encodeURIComponent(id)}`) };

  const route = async () => {
    const [screen = "live", id] = location.hash.slice(1).split("/").map(decodeURIComponent);
    if (screen !== "file") await reload();
    current?.stop();
    current = viewFor(screen, id ?? null);
    show(main, current.element);
    for (const tab of tabs) {
      if (tab.hash === `#${screen}`) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
  };
  const viewFor = (screen: string, id: string | null): View => {
    if (screen === "usage") return usageView(api, rules, id, report);
    if (screen === "file") return rulesFileView(api, reload, report);
    if (screen === "rules" && id === "new") return newRuleView(api, nav);
    if (screen === "rules" && id !== null) {
      const rule = rules.find((r) => r.id === id);
      if (rule) return ruleView(api, rule, nav, report);
      report(new Error(`No rule ${id} (it may have been deleted, or belong to another tenant).`));
    }
    if (screen === "rules") return rulesList(rules, nav);
    return liveView(api, rules, report);
  };

  const stopHealth = healthBanner(api, banner, instances);
  const onHash = () => void route();
  window.addEventListener("hashchange", onHash);
  const stop = (message?: string) => {
    window.removeEventListener("hashchange", onHash);
    stopHealth();
    current?.stop();
    api.close();
    forgetToken();
    signIn(message);
  };
  signOut.addEventListener("click", () => stop());
  void route();
}

/** A failure no screen caught still says so, above whatever the page shows. */
function unexpected(message: string): void {
  document.getElementById("fatal")!.textContent = `Something failed in the dashboard: ${message}. Reloading the page may help.`;
}
window.addEventListener("error", (event) => unexpected(event.message));
window.addEventListener("unhandledrejection", (event) => unexpected(event.reason instanceof Error ? event.reason.message : String(event.reason)));

const token = savedToken();
if (token === null) signIn();
else start(new Api(token));
