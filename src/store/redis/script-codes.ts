/**
 * The numbers TypeScript and lua/decide.lua must agree on, written once.
 * decide.lua defines none of them: decideScript (scripts.ts) puts
 * `luaPrelude()` in front of it, one `local NAME = n` per number, so a code
 * changed here reaches the script with the next registration.
 */

import { WEIGHT_ONE } from "../../domain/algorithms/sliding-window-counter.js";
import type { Action, Algorithm } from "../../domain/rule.js";

/** A rule's algorithm in ARGV; in Lua ALGO_<name>. */
export const ALGORITHM_CODES: Record<Algorithm, number> = {
  SLIDING_WINDOW_COUNTER: 1,
  TOKEN_BUCKET: 2,
  FIXED_WINDOW: 3,
  SLIDING_WINDOW_LOG: 4,
  LEAKY_BUCKET: 5,
  CONCURRENCY: 6,
};

/** A rule's action in ARGV; in Lua ACTION_<name>. */
export const ACTION_CODES: Record<Action, number> = { REJECT: 1, THROTTLE: 2, LOG_ONLY: 3 };

/**
 * ARGV[3], a set of flags; in Lua MODE_<name>. DECIDE is none of them: decide
 * and count. DRY_RUN counts nothing, RESERVE replies the slot's verdicts and
 * receipts of what it took, RESERVE | DRY_RUN reserves without taking, and
 * RELEASE gives back what the receipts say. The sums are the numbers the
 * modes had when each was a code of its own, so lua:bench can still drive a
 * decide.lua from before with the same arguments.
 */
export const MODE = { DECIDE: 0, DRY_RUN: 1, RESERVE: 2, RELEASE: 4 } as const;
export type Mode = number;

/** What a release replies per rule; in Lua RELEASE_<name>. */
export const RELEASE_OUTCOMES = { NOTHING_LEFT: 0, SUBTRACTED: 1, RESTORED: 2 } as const;

/**
 * The script's constants as Lua, on one line without a line break, so that the
 * line numbers in Redis's error messages are decide.lua's own. The same text
 * every time: the script's SHA1 must not change between registrations.
 */
export function luaPrelude(): string {
  const constants: [string, number][] = [
    ...prefixed("ALGO_", ALGORITHM_CODES),
    ...prefixed("ACTION_", ACTION_CODES),
    ...prefixed("MODE_", MODE),
    ...prefixed("RELEASE_", RELEASE_OUTCOMES),
    ["WEIGHT_ONE", WEIGHT_ONE],
  ];
  return constants.map(([name, value]) => `local ${name} = ${value} `).join("");
}

function prefixed(prefix: string, codes: Record<string, number>): [string, number][] {
  return Object.entries(codes).map(([name, code]) => [`${prefix}${name}`, code]);
}
