import type { Action, Rule } from "./rule.js";

export interface ThrottleEvent {
  at: Date;
  tenantId: string;
  ruleId: string;
  ruleName: string;
  key: string;
  resource: string | null;
  method: string | null;
  action: Action;
  limit: number;
  retryAfter: number | null;
  /** A LOG_ONLY rule would have refused; the request went through. */
  shadow: boolean;
  /** How many refusals this event stands for. */
  count: number;
}

export type RuleChangeKind = "CREATED" | "UPDATED" | "DELETED";

export const RULE_CHANGE_KINDS: readonly RuleChangeKind[] = ["CREATED", "UPDATED", "DELETED"];

export interface RuleChange {
  kind: RuleChangeKind;
  ruleId: string;
  tenantId: string;
  version: number;
  rule: Rule | null;
  at: Date;
}
