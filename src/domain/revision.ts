import type { RuleChangeKind } from "./events.js";
import type { Override } from "./override.js";
import type { Rule } from "./rule.js";

/** One change of one rule, as kept in its history: deleting a rule keeps its history. */
export interface RuleRevision {
  ruleId: string;
  tenantId: string;
  /** The rule's version after the change; a deletion takes the version after the last one. */
  version: number;
  kind: RuleChangeKind;
  at: Date;
  /** Who made the change (an API key's name once API keys exist); null when not known. */
  actor: string | null;
  /** Why, when the change says more than its fields do: "rolled back to version 2", "promoted from LOG_ONLY to REJECT". */
  note: string | null;
  /** The rule before the change; null for a creation. */
  before: Rule | null;
  /** The rule after the change; null for a deletion. */
  after: Rule | null;
  /** For a change to one of the rule's overrides (the rule's fields unchanged): the override before and after; null otherwise. */
  override: { before: Override | null; after: Override | null } | null;
}

/** Who asks for a change, and why: recorded with the revision it writes. */
export interface ChangeOrigin {
  actor: string | null;
  note: string | null;
}

export const UNKNOWN_ORIGIN: ChangeOrigin = Object.freeze({ actor: null, note: null });
