/**
 * A rule's autoBan (docs/bans.md): the limiter tells this of every enforcing
 * refusal of a rule that has one; after `refusals` refusals of one bucket
 * within `withinSeconds`, counted by every instance together (RefusalCounter),
 * the bucket's identity is banned for `banSeconds`. Which identity: the
 * bucket's value of the rule's first USER, IP, API_KEY or CLIENT dimension
 * (autoBanDimension), read from its key (so for several checks decided
 * together, the value of the check whose bucket it is), in the request's
 * tenant (for a "*" rule too).
 *
 * Exactly one counter reply is the threshold itself, so one instance bans;
 * should two ever ban at once, the ban table's one row per value makes them
 * one ban. A refusal of a value already banned is not counted (it cannot
 * happen but for the moment a ban takes to reach this instance). Counting
 * never holds a check up: it runs after the decision, and its faults are
 * logged, not raised.
 */

import { autoBanDimension } from "../../domain/ban.js";
import { dimensionValueOfKey } from "../../domain/bucket-key.js";
import type { RuleResult } from "../../domain/decision.js";
import type { Clock, RefusalCounter } from "../../domain/ports.js";
import type { BanScreen } from "./ban-screen.js";
import type { BanService } from "./ban-service.js";

/** What the limiter tells of refusals (LimiterOptions.refusals). */
export interface RefusalListener {
  /** `tenantId`: the request's (a "*" rule's refusal is the requesting tenant's). */
  refused(tenantId: string, result: RuleResult): void;
}

export interface AutoBannerOptions {
  counter: RefusalCounter;
  bans: BanService;
  screen: BanScreen;
  clock: Clock;
  log: { warn(fields: object, message: string): void };
}

export class AutoBanner implements RefusalListener {
  constructor(private readonly options: AutoBannerOptions) {}

  refused(tenantId: string, { rule, key }: RuleResult): void {
    const autoBan = rule.autoBan;
    if (autoBan === null || rule.action === "LOG_ONLY") return;
    const dimension = autoBanDimension(rule.scope);
    const value = dimension === null ? null : dimensionValueOfKey(key, dimension);
    if (dimension === null || value === null) return;
    const { counter, bans, screen, clock, log } = this.options;
    if (screen.find(tenantId, dimension, value, clock.now()) !== null) return;
    // A "*" rule's bucket key names the tenant, so one tenant's refusals never count towards another's ban.
    void counter
      .count(`${rule.id}\n${key}`, autoBan.withinSeconds * 1000)
      .then((count) => (count === autoBan.refusals ? bans.autoBan({ ruleId: rule.id, tenantId, dimension, value, banSeconds: autoBan.banSeconds }) : null))
      .catch((error: unknown) => log.warn({ err: error, ruleId: rule.id, key }, "autoBan: counting a refusal or banning failed; this refusal bans nobody"));
  }
}
