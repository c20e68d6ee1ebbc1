/** The banner every screen shows: degraded decisions (a breaker open), rules from the snapshot, the instances alive; polled every few seconds. */

import type { Api } from "./api.js";
import { h, show } from "./dom.js";
import { DashboardHealthDocument } from "./generated/operations.js";

const REFRESH_MS = 5_000;

export function healthBanner(api: Api, banner: HTMLElement, instances: HTMLElement): () => void {
  const refresh = async () => {
    try {
      const { health } = await api.request(DashboardHealthDocument, {});
      const warnings: HTMLElement[] = [];
      if (health.degraded) {
        const open = health.breakers.filter((b) => b.state !== "closed").map((b) => `${b.shard} ${b.state}`);
        warnings.push(h("p", { className: "banner danger" }, h("strong", {}, "Degraded: "), `the counter store's breaker is open (${open.join(", ")}); checks are decided by each rule's failure mode.`));
      }
      if (health.rules.source === "snapshot") {
        warnings.push(h("p", { className: "banner warning" }, h("strong", {}, "Rules from the snapshot: "), "the rule database is unreachable; rules cannot be changed until it answers."));
      }
      show(banner, ...warnings);
      instances.textContent = health.instances === null ? `instances unknown · ${plural(health.rules.count, "rule")}` : `${plural(health.instances, "instance")} · ${plural(health.rules.count, "rule")}`;
    } catch (error) {
      show(banner, h("p", { className: "banner danger" }, h("strong", {}, "Health unknown: "), error instanceof Error ? error.message : String(error)));
    }
  };
  void refresh();
  const timer = setInterval(() => void refresh(), REFRESH_MS);
  return () => clearInterval(timer);
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
