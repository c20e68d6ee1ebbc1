/**
 * Screening: what is decided about a request before any rule is, from what
 * this instance holds in memory (no counter store round trip). Access lists
 * and bans are screens; the limiter asks them in order of precedence (a deny
 * list entry, then a ban, then an allow list entry) and the first that has a
 * verdict decides. An admitted request is counted by no rule of its tenant;
 * a refused one touches no counter.
 */

import type { CheckRequest } from "./request.js";

export const DECISION_REASON_CODES = ["DENY_LISTED", "BANNED", "ALLOW_LISTED"] as const;
export type DecisionReasonCode = (typeof DECISION_REASON_CODES)[number];

/** Why a request was decided without its rules. */
export interface DecisionReason {
  code: DecisionReasonCode;
  /** For people: which list entry or ban, in words (never another tenant's data). */
  message: string;
  /** When the verdict ends (a ban's end); null: until the entry is removed. */
  until: Date | null;
}

export interface Screening {
  admit: boolean;
  reason: DecisionReason;
}

export interface RequestScreen {
  /** Null: this screen has no verdict on the request, the next one (or the rules) decides. Must not do I/O. */
  screen(request: CheckRequest, nowMs: number): Screening | null;
}

/** The first verdict of the screens, in their order, on any of the checks of one request. */
export function screenRequest(screens: readonly RequestScreen[], checks: readonly CheckRequest[], nowMs: number): Screening | null {
  for (const screen of screens) {
    for (const check of checks) {
      const screening = screen.screen(check, nowMs);
      if (screening !== null) return screening;
    }
  }
  return null;
}
