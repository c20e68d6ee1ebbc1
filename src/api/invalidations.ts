/**
 * The `invalidations` subscription: what makes a client's remembered
 * refusals stale, for one tenant. What can make a refused check admissible
 * before its Retry-After: a rule change (an override's too), a bucket reset,
 * and an entry added to an allow list (ALLOW_LISTED: an allow-listed caller
 * is admitted before any rule counts it). An override that ends by itself
 * needs no message: a refusal under it says to retry when it ends (see the
 * limiter). So a client that hears these may keep a refusal until then (see
 * src/client/refusal-cache.ts). Removals and DENY entries need none: what
 * they change was not refused by a rule, and the client remembers no other
 * refusal.
 *
 * It carries ids and bucket keys only, never a rule's definition, so a
 * CHECKER key may subscribe: who may check a tenant's limits may hear when
 * those decisions go stale. A subscriber of tenant T hears about the rules of
 * T and of "*" (those apply to T too); of a "*" rule's buckets it hears only
 * T's own (keyed "tenant:T|…") and the rule's one shared bucket, never
 * another tenant's.
 */

import { NO_ATTRIBUTES } from "../domain/attributes.js";
import { compileBucketKey, WHOLE_RULE_KEY } from "../domain/bucket-key.js";
import type { BucketReset, Invalidation, RuleChange } from "../domain/events.js";
import type { EventBus, Unsubscribe } from "../domain/ports.js";
import { ALL_TENANTS } from "../domain/rule.js";
import type { EventFilter } from "./event-pubsub.js";

/** How a "*" rule keyed by tenant alone names tenant T's bucket: the prefix of every T bucket of a "*" rule. */
const tenantPrefixOf = compileBucketKey({ tenantId: ALL_TENANTS, scope: ["TENANT"], attributeKeys: [] });

/**
 * Listens for the filter's tenant's invalidations (every tenant's for null)
 * while the subscriber may receive them, pushes LISTENING once it does, and
 * returns how to stop.
 */
export function listenForInvalidations(events: EventBus, { tenantId, mayReceive }: EventFilter, push: (invalidation: Invalidation) => void): Unsubscribe {
  const visibleToTenant = tenantId == null ? () => true : visibleTo(tenantId);
  const visible = (ruleTenant: string, key: string | null) => visibleToTenant(ruleTenant, key) && mayReceive(ruleTenant);
  const stopChanges = events.subscribe("ruleChange", (change) => {
    if (visible(change.tenantId, null)) push(ruleChanged(change));
  });
  const stopResets = events.subscribe("bucketReset", (reset) => {
    if (visible(reset.tenantId, reset.key)) push(bucketReset(reset));
  });
  const stopAllowed = events.subscribe("accessListChange", ({ kind, entry }) => {
    if (kind === "ADDED" && entry.list === "ALLOW" && visible(entry.tenantId, null)) push({ kind: "ALLOW_LISTED", tenantId: entry.tenantId, ruleId: null, key: null, at: new Date() });
  });
  push({ kind: "LISTENING", tenantId: null, ruleId: null, key: null, at: new Date() });
  return () => {
    stopChanges();
    stopResets();
    stopAllowed();
  };
}

function visibleTo(tenantId: string): (ruleTenant: string, key: string | null) => boolean {
  const prefix = tenantPrefixOf({ tenantId, userId: null, ip: null, apiKey: null, userAgent: null, cookie: null, resource: null, method: null, cost: 1, dryRun: false, attributes: NO_ATTRIBUTES, ignorePathCase: false })!;
  return (ruleTenant, key) => {
    if (ruleTenant === tenantId) return true;
    if (ruleTenant !== ALL_TENANTS) return false;
    return key === null || key === WHOLE_RULE_KEY || key === prefix || key.startsWith(`${prefix}|`);
  };
}

function ruleChanged(change: RuleChange): Invalidation {
  return { kind: "RULE_CHANGED", tenantId: change.tenantId, ruleId: change.ruleId, key: null, at: change.at };
}

function bucketReset(reset: BucketReset): Invalidation {
  return { kind: "BUCKET_RESET", tenantId: reset.tenantId, ruleId: reset.ruleId, key: reset.key, at: new Date() };
}
