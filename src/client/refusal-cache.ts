/**
 * Refusals remembered on the caller's side, so that a caller hammering over
 * its limit costs no network at all: once Floodgate refuses a check, the same
 * check (same tenant, user, ip, API key, user agent, cookie, path, method and
 * attributes, at that cost or more) is refused here until the wait Floodgate gave
 * (retryAfterMs: Retry-After rounds it up to whole seconds, which would refuse
 * a token bucket's next token for most of a second more), counted from when the
 * check was sent. Only an enforcing refusal counted
 * against Floodgate's counters is remembered: never an admission, a degraded
 * (failure-mode) answer, a screened one (a deny list entry or a ban: removing
 * an entry or lifting a ban is not pushed as an invalidation), anything the
 * client decided itself, or a refusal by a CONCURRENCY rule, which a release
 * ends before any time it could give.
 *
 * Why it stays true: a refused bucket only drains with time, and other
 * requests only add to it; only two things can make it admit sooner, a change
 * of one of its rules and a reset of one of its buckets, and Floodgate pushes
 * both (the invalidations subscription). So:
 *   - an entry is forgotten at once when any rule of its decision changes or
 *     any bucket of it is reset;
 *   - entries are served and learnt only while that push channel is live
 *     (from its LISTENING message on); when it goes down every entry is
 *     forgotten, since what it would have said is lost;
 *   - a refusal is not learnt when anything was invalidated while its check
 *     was in flight (the invalidation may concern what it refused on).
 * The cost of an entry that ends up too cautious is one network check.
 *
 * Keyed by the check itself rather than by bucket: finding a check's buckets
 * would take the rules' globs and key builders, which the client has only in
 * Node. Memory is bounded: at most maxEntries checks, least recently used
 * going first.
 */

import { LruCache } from "../domain/lru-cache.js";
import { ALL_TENANTS } from "../domain/rule.js";
import { foldPathCase, withoutQueryOrFragment } from "../domain/glob.js";
import { retryAfterSeconds, type FloodgateDecision, type HttpHeader } from "./decision.js";
import type { CheckLimitsInput } from "./generated/operations.js";

interface Entry {
  /** The check's tenant. */
  tenantId: string;
  decision: FloodgateDecision;
  /** The smallest cost known to be refused. */
  cost: number;
  /** When the check that was refused was sent, by the clock waits are counted on (see refusal()'s tickMs). */
  sentAtMs: number;
  untilMs: number;
  /** The refusal as replay() last gave it, and the millisecond it stood at (see replay), on both clocks. */
  replayed: FloodgateDecision | null;
  replayedAtMs: number;
  replayedAtTickMs: number;
}

/** A RateLimit item's sf-string name, its r=, and its t= up to the number (an item without t has nothing to count down). */
const RATE_LIMIT_ITEM = /("(?:[^"\\]|\\.)*";r=\d+;t=)(\d+)/g;

export class RefusalCache {
  private readonly entries: LruCache<string, Entry>;
  private live = false;
  /** Counts invalidations: a check sent before the latest one must not teach the cache. */
  private invalidations = 0;

  constructor(maxEntries: number) {
    this.entries = new LruCache({ maxEntries });
  }

  /** Where a check stands: what a refusal learnt from its answer will be compared with. */
  mark(): number {
    return this.live ? this.invalidations : -1;
  }

  /**
   * The remembered refusal of this check, as it stands at nowMs; null when there is none.
   * nowMs is the wall clock (the decision's decidedAt); tickMs, on the clock learn()'s sentAtMs
   * was read from, counts the waits down. The client gives a clock that only moves forward
   * (performance.now's): a wall clock stepped back an hour kept a 2 s refusal for an hour more.
   */
  refusal(request: CheckLimitsInput, nowMs: number, tickMs: number = nowMs): FloodgateDecision | null {
    // Empty, as while nothing is refused: no key to build (a tenth of a check's CPU in the client).
    if (!this.live || this.entries.size === 0) return null;
    const key = keyOf(request);
    const entry = this.entries.get(key);
    if (entry === undefined) return null;
    if (entry.untilMs <= tickMs) {
      this.entries.delete(key);
      return null;
    }
    if ((request.cost ?? 1) < entry.cost) return null;
    return replay(entry, nowMs, tickMs);
  }

  /** Learns from Floodgate's answer to a check sent at `mark` (see mark()), at sentAtMs on refusal()'s tickMs clock. */
  learn(request: CheckLimitsInput, decision: FloodgateDecision, sentAtMs: number, mark: number): void {
    if (decision.allowed || decision.degraded || decision.reason !== null || decision.retryAfterMs === null) return;
    if (decision.results.some((r) => !r.allowed && r.rule.algorithm === "CONCURRENCY")) return;
    if (!this.live || mark !== this.invalidations) return;
    this.entries.set(keyOf(request), { tenantId: request.tenantId, decision, cost: request.cost ?? 1, sentAtMs, untilMs: sentAtMs + decision.retryAfterMs, replayed: null, replayedAtMs: -1, replayedAtTickMs: -1 });
  }

  /** Every bucket of the rule may admit again (the rule changed). */
  forgetRule(ruleId: string): void {
    this.invalidations++;
    this.entries.deleteWhere((_, entry) => entry.decision.results.some((r) => r.rule.id === ruleId));
  }

  /** One bucket may admit again (it was reset). */
  forgetBucket(ruleId: string, key: string): void {
    this.invalidations++;
    this.entries.deleteWhere((_, entry) => entry.decision.results.some((r) => r.rule.id === ruleId && r.key === key));
  }

  /** Every check of the tenant ("*": of every tenant) may be admitted again (an allow list entry was added). */
  forgetTenant(tenantId: string): void {
    this.invalidations++;
    this.entries.deleteWhere((_, entry) => tenantId === ALL_TENANTS || entry.tenantId === tenantId);
  }

  /** The push channel is live (true) or down (false, and everything is forgotten). */
  setLive(live: boolean): void {
    if (!live) {
      this.invalidations++;
      this.entries.clear();
    }
    this.live = live;
  }

  get isLive(): boolean {
    return this.live;
  }

  get size(): number {
    return this.entries.size;
  }
}

/**
 * Everything Floodgate reads of a check to find its rules and buckets, one
 * field after another, then its attributes sorted by key (one check however
 * it lists them). Floodgate refuses control characters in every field, so NUL
 * cannot occur inside a field of a check it answered, and "=" in no attribute key.
 * Built by concatenation: a caller over its limit pays for this key on every check.
 */
function keyOf(r: CheckLimitsInput): string {
  const fields = `${r.tenantId}\u0000${r.userId ?? ""}\u0000${r.ip ?? ""}\u0000${r.apiKey ?? ""}\u0000${r.userAgent ?? ""}\u0000${r.cookie ?? ""}\u0000${resourceOf(r)}\u0000${r.method?.toUpperCase() ?? ""}`;
  const attributes = r.attributes;
  if (attributes === undefined || attributes === null || attributes.length === 0) return fields;
  return `${fields}\u0000${attributes
    .map(({ key, value }) => `${key}=${value}`)
    .sort()
    .join("\u0000")}`;
}

/**
 * The path as Floodgate compares it; one that ignores letter case marked, since
 * rules match it otherwise, and folded, unless folding changes its length
 * ("İ"): rules then may match its spelling and not its twins' (rule-index.ts).
 */
function resourceOf(r: CheckLimitsInput): string {
  if (r.resource === undefined || r.resource === null) return "";
  const path = withoutQueryOrFragment(r.resource);
  if (r.ignorePathCase !== true) return path;
  const folded = foldPathCase(path);
  return `\u0001${folded.length === path.length ? folded : path}`;
}

/**
 * The refusal as it stands now: the waits (retryAfter, Retry-After, each
 * refusing rule's retryAfter) and each RateLimit item's t counted down to
 * now; everything else as Floodgate said it.
 *
 * Worked out once per millisecond: everything it counts down is a function of
 * the millisecond, and a caller hammering over its limit asks hundreds of times
 * in one (working it out each time was three fifths of such a check's CPU).
 * Each check still gets a decision object of its own; the checks of one
 * millisecond share its headers and results, as every decision shares its rules.
 */
function replay(entry: Entry, nowMs: number, tickMs: number): FloodgateDecision {
  if (entry.replayed === null || entry.replayedAtMs !== nowMs || entry.replayedAtTickMs !== tickMs) {
    entry.replayed = countedDown(entry, nowMs, tickMs);
    entry.replayedAtMs = nowMs;
    entry.replayedAtTickMs = tickMs;
  }
  return { ...entry.replayed };
}

function countedDown({ decision, sentAtMs }: Entry, nowMs: number, tickMs: number): FloodgateDecision {
  const elapsedMs = tickMs - sentAtMs;
  // An entry is served only before its wait ends (untilMs > tickMs): what is left of a wait is at least a millisecond.
  const msLeft = (ms: number | null) => (ms === null ? null : Math.max(1, sentAtMs + ms - tickMs));
  const retryAfterMs = msLeft(decision.retryAfterMs);
  const retryAfter = retryAfterMs === null ? null : retryAfterSeconds(retryAfterMs, 0);
  // t was counted by Floodgate when it decided; only the time this process has seen pass since is taken off it.
  const headers = decision.headers.map((header): HttpHeader => {
    if (header.name === "Retry-After") return { name: header.name, value: String(retryAfter) };
    if (header.name !== "RateLimit") return header;
    const value = header.value.replace(RATE_LIMIT_ITEM, (_, head: string, t: string) => `${head}${Math.max(0, Math.ceil((Number(t) * 1000 - elapsedMs) / 1000))}`);
    return { name: header.name, value };
  });
  return {
    ...decision,
    source: "CLIENT_REFUSAL_CACHE",
    decidedAt: new Date(nowMs).toISOString(),
    retryAfter,
    retryAfterMs,
    results: decision.results.map((r) => {
      const left = msLeft(r.retryAfterMs);
      return left === null ? r : { ...r, retryAfter: retryAfterSeconds(left, 0), retryAfterMs: left };
    }),
    headers,
  };
}
