/**
 * Live throttling: the throttle and near-limit events of every instance, as
 * they come, the bans placed and lifted (by hand or by a rule's autoBan), and
 * the buckets refused most in the last minutes.
 *
 * A flood must not freeze the page: events are queued as they arrive and drawn
 * at most once per animation frame, newest first, in a list of at most
 * MAX_ROWS rows (and a queue of as many: events that would scroll off before
 * they are drawn are never drawn). The tenant and rule filters go to the
 * server (the subscription's arguments; bans are filtered by tenant there and
 * by rule here, a ban placed by hand belonging to no rule); action, shadow and
 * kind are applied here, a ban counting as a refusal (REJECT, enforced).
 */

import type { Api, ApiError } from "./api.js";
import { field, formatNumber, formatTime, h, select, show } from "./dom.js";
import {
  DashboardBanEventsDocument,
  DashboardNearLimitEventsDocument,
  DashboardThrottleEventsDocument,
  DashboardTopBucketsDocument,
  type DashboardBanEventsSubscription,
  type DashboardRuleFragment,
} from "./generated/operations.js";
import type { View } from "./view.js";

const MAX_ROWS = 200;
const TOP_REFRESH_MS = 5_000;
const TOP_LOOKBACK_MS = 5 * 60_000;

interface LiveEvent {
  kind: "throttle" | "near-limit" | "ban" | "unban";
  at: string;
  tenantId: string;
  ruleName: string;
  key: string;
  resource?: string | null;
  method?: string | null;
  action: string;
  shadow: boolean;
  count: number;
  detail: string;
}

export function liveView(api: Api, rules: readonly DashboardRuleFragment[], report: (error: unknown) => void): View {
  const tenant = h("input", { type: "search", placeholder: "every tenant", autocomplete: "off" });
  const rule = select([["", "every rule"], ...rules.map((r): [string, string] => [r.id, `${r.name} (${r.tenantId})`])]);
  const action = select([["", "any"], "REJECT", "THROTTLE", "LOG_ONLY"]);
  const shadow = select([["", "any"], ["yes", "shadow only"], ["no", "enforced only"]]);
  const kind = select([["", "every kind"], ["throttle", "throttle only"], ["near-limit", "near-limit only"], ["ban", "bans only"]]);
  const pause = h("button", { type: "button", className: "secondary", attrs: { "aria-pressed": "false" } }, "Pause");
  const status = h("p", { className: "muted", attrs: { role: "status" } }, "Connecting…");
  const list = h("ol", { className: "events", attrs: { "aria-label": "Live events, newest first", "aria-live": "off" } });
  const topBody = h("tbody");
  const topStatus = h("p", { className: "muted" });

  let pending: LiveEvent[] = [];
  let frame = 0;
  let paused = false;
  let events = 0;
  let requests = 0;
  let unsubscribe: (() => void)[] = [];

  const matches = (event: LiveEvent) =>
    (action.value === "" || event.action === action.value) && (shadow.value === "" || event.shadow === (shadow.value === "yes")) && (kind.value === "" || event.kind === kind.value || (kind.value === "ban" && event.kind === "unban"));

  const receive = (event: LiveEvent) => {
    events++;
    requests += event.count;
    if (!matches(event)) return;
    pending.push(event);
    if (pending.length > MAX_ROWS) pending = pending.slice(-MAX_ROWS);
    if (frame === 0 && !paused) frame = requestAnimationFrame(draw);
  };

  const draw = () => {
    frame = 0;
    const rows = document.createDocumentFragment();
    for (let i = pending.length - 1; i >= 0; i--) rows.append(row(pending[i]!));
    pending = [];
    list.prepend(rows);
    while (list.childElementCount > MAX_ROWS) list.lastElementChild!.remove();
    status.textContent = `${formatNumber(events)} events received (${formatNumber(requests)} requests), ${list.childElementCount} shown`;
  };

  const subscribe = () => {
    for (const stop of unsubscribe) stop();
    const variables = { tenantId: tenant.value.trim() || null, ruleId: rule.value || null };
    const fail = (error: ApiError) => {
      // The server ends a subscription that fell too far behind (docs/events.md): what it missed is gone, the stream goes on.
      if (error.code === "SUBSCRIBER_TOO_SLOW") {
        subscribe();
        status.textContent = "Events came faster than this page could take them: some were skipped.";
        return;
      }
      status.textContent = "The live stream stopped.";
      report(error);
    };
    unsubscribe = [
      api.subscribe(DashboardThrottleEventsDocument, variables, ({ throttleEvents: e }) => receive({ ...e, kind: "throttle", detail: e.retryAfter === null || e.retryAfter === undefined ? "" : `retry after ${e.retryAfter} s` }), fail),
      api.subscribe(DashboardNearLimitEventsDocument, variables, ({ nearLimitEvents: e }) => receive({ ...e, kind: "near-limit", detail: `${formatNumber(e.remaining)} left` }), fail),
      api.subscribe(
        DashboardBanEventsDocument,
        { tenantId: variables.tenantId },
        ({ banEvents: e }) => {
          if (variables.ruleId === null || e.ruleId === variables.ruleId) receive(banEvent(e, rules));
        },
        fail,
      ),
    ];
    status.textContent = "Listening…";
  };

  const refreshTop = async () => {
    try {
      const { topBuckets } = await api.request(DashboardTopBucketsDocument, { tenantId: tenant.value.trim() || null, since: new Date(Date.now() - TOP_LOOKBACK_MS).toISOString() });
      show(topBody, ...topBuckets.map((b) => h("tr", {}, h("td", {}, b.tenantId), h("td", {}, b.ruleName ?? b.ruleId), h("td", { className: "key" }, b.key), h("td", { className: "num" }, formatNumber(b.refusals)))));
      topStatus.textContent = topBuckets.length === 0 ? "No refusals in the last 5 minutes." : "";
    } catch (error) {
      report(error);
    }
  };

  for (const control of [tenant, rule]) control.addEventListener("change", () => (subscribe(), void refreshTop()));
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (!paused && pending.length > 0) frame = requestAnimationFrame(draw);
  });
  const clear = h("button", { type: "button", className: "secondary" }, "Clear");
  clear.addEventListener("click", () => list.replaceChildren());

  const element = h(
    "section",
    { attrs: { "aria-labelledby": "live-title" } },
    h("h2", { id: "live-title" }, "Live throttling"),
    h(
      "form",
      { className: "filters", attrs: { "aria-label": "Filter events" }, onsubmit: (e: Event) => e.preventDefault() },
      field("Tenant", tenant).row,
      field("Rule", rule).row,
      field("Action", action).row,
      field("Shadow", shadow).row,
      field("Events", kind).row,
      h("div", { className: "actions" }, pause, clear),
    ),
    h(
      "div",
      { className: "columns" },
      h("div", { className: "panel" }, status, list),
      h(
        "div",
        { className: "panel" },
        h("h3", {}, "Top limited buckets, last 5 minutes"),
        h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Tenant"), h("th", {}, "Rule"), h("th", {}, "Bucket"), h("th", { className: "num" }, "Refusals"))), topBody),
        topStatus,
      ),
    ),
  );
  subscribe();
  void refreshTop();
  const timer = setInterval(() => void refreshTop(), TOP_REFRESH_MS);
  return {
    element,
    stop: () => {
      clearInterval(timer);
      cancelAnimationFrame(frame);
      for (const stop of unsubscribe) stop();
    },
  };
}

/** A ban as a row: its identifier where a throttle event has its bucket, the rule whose autoBan placed it (or "by hand"), its end. */
function banEvent(e: DashboardBanEventsSubscription["banEvents"], rules: readonly DashboardRuleFragment[]): LiveEvent {
  const placed = e.kind === "BANNED";
  return {
    kind: placed ? "ban" : "unban",
    at: e.at,
    tenantId: e.tenantId,
    ruleName: e.ruleId === null || e.ruleId === undefined ? "by hand" : (rules.find((r) => r.id === e.ruleId)?.name ?? e.ruleId),
    key: `${e.ban.dimension.toLowerCase()}:${e.ban.value}`,
    action: "REJECT",
    shadow: false,
    count: 1,
    detail: placed ? `until ${formatTime(e.ban.until)}` : "lifted",
  };
}

const LABELS: Record<LiveEvent["kind"], string> = { throttle: "refused", "near-limit": "near limit", ban: "banned", unban: "unbanned" };

function row(event: LiveEvent): HTMLLIElement {
  const label = event.kind === "throttle" && event.shadow ? "would refuse" : LABELS[event.kind];
  return h(
    "li",
    { className: `event ${event.kind}${event.shadow ? " shadow" : ""}` },
    h("time", { dateTime: event.at }, formatTime(event.at)),
    h("span", { className: "badge" }, label),
    h("span", {}, event.tenantId),
    h("strong", {}, event.ruleName),
    h("span", { className: "key" }, event.key),
    h("span", { className: "muted" }, [event.method, event.resource].filter(Boolean).join(" ")),
    h("span", { className: "num" }, event.count > 1 ? `×${formatNumber(event.count)}` : ""),
    h("span", { className: "muted" }, event.detail),
  );
}
