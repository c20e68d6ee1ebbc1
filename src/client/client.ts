/**
 * The Floodgate client: `await client.check(request)` → the decision.
 *
 * Network batching. Concurrent checks are gathered into one checkLimitsBatch
 * request per tenant: a batch closes when it holds batch.maxSize checks, or
 * when the event loop turns (batch.maxWaitMs 0, the default), or maxWaitMs
 * after its first check. With maxWaitMs 0, the checks the callers of an
 * answered request make as soon as they have their answers close their
 * batch at once, once those callers have run: they can only have been made
 * in answer to it, and waiting for the loop to turn held them behind every
 * other event of the turn, in a client with two requests in flight the
 * other request's answer, whose callers then joined them, so that the two
 * requests went out and came back together, in lock step.
 * At most batch.parallel requests (2 by default) are
 * meant to be in flight: a batch that closes holding at least twice MIN_PART
 * checks goes out split into as many requests as are free to go (parallel
 * less those in flight), and whole when none is, never waiting for one.
 * One request at a time keeps the work in lock step:
 * callers that each await a check get their answers in the same turn, so
 * their next checks form the next batch, which waits for this process to
 * write it, for Floodgate to decide it and for Redis, one after the other,
 * each idle while another works. Two requests overlap these steps (the first
 * part's callers send their next checks while the second part is still being
 * decided), so a machine's cores work at once; once they run, each
 * answered request's callers form the next request whole, so requests stay
 * as large as the callers allow (splitting every batch again had them shrink
 * to 8 checks, each paying a request's cost). A batch is split by caller
 * (user, IP, API key, cookie and user agent together): one caller's checks
 * stay in one request, in the order they were made, while Floodgate may
 * apply two parts in either order, as it would the checks of callers that
 * each sent their own. The checks of one checkMany call are decided as one
 * by one: a tenant's travel as one group that no split divides, and more
 * than maxSize of them in requests one after another. Its document text never changes, so the server
 * compiles it once for its fast path. Batches are kept to one tenant because
 * Floodgate refuses a whole operation whose checks mix tenants a key may not
 * check; a batch refused for one check's bad input is sent again without it
 * (Floodgate counts nothing of a refused batch), so no check fails for
 * another's fault.
 *
 * Failure policy. Every call has a deadline, timeoutMs after it was made.
 * When Floodgate times out, cannot be reached or answers 5xx, the checks are
 * decided by failureMode: OPEN allows, CLOSED denies (Retry-After 1 s), LOCAL
 * decides in this process with the rules it last saw (local-limiter.ts); the
 * decision says degraded: true and source CLIENT_FAILURE_MODE. An outage
 * never makes a check throw; stats() counts it. A check that is the caller's
 * fault (bad input, a key that may not check that tenant) throws a
 * FloodgateError with Floodgate's code.
 *
 * The default deadline is 100 ms, not Envoy's 20 ms: Floodgate gives Redis
 * 50 ms (REDIS_TIMEOUT_MS) before it decides by each rule's own failureMode,
 * which knows more than the client's one mode, so the client waits for that
 * answer and a little more; and on a shared machine a healthy check's p99 is
 * a few milliseconds, so 100 ms is only reached by a Floodgate in trouble.
 *
 * Rules. A batch's answer names each rule by id and version, and the client
 * fills in the rest from the rules it has seen (rule-book.ts): a rule's
 * fields repeated in every decision and result made most of the bytes
 * Floodgate wrote and the client parsed.
 *
 * Refusal cache: see refusal-cache.ts and invalidation-feed.ts.
 */

import { ValidationError } from "../domain/errors.js";
import { MAX_BATCH } from "../domain/service-limits.js";
import { platform } from "#floodgate-platform";
import { ruleLessDecision, type FloodgateDecision } from "./decision.js";
import {
  FloodgateChecksDocument,
  FloodgateChecksInFullDocument,
  FloodgateInvalidationsDocument,
  FloodgateReleaseLeaseDocument,
  FloodgateResetLimitDocument,
  FloodgateRulesDocument,
  type CheckLimitsInput,
  type FloodgateChecksInFullQuery,
  type FloodgateChecksQuery,
  type FloodgateRulesQuery,
  type FloodgateReleaseLeaseMutation,
  type FloodgateResetLimitMutation,
} from "./generated/operations.js";
import { InvalidationFeed } from "./invalidation-feed.js";
import type { LocalLimiter } from "./local-limiter.js";
import { RefusalCache } from "./refusal-cache.js";
import { RuleBook } from "./rule-book.js";
import { DeadlineExceeded, fetchTransport, monotonicMs, type FetchFunction, type Transport, type TransportAnswer } from "./transport.js";
import { fnv1a } from "../domain/fnv1a.js";

export type FailureMode = "OPEN" | "CLOSED" | "LOCAL";

export interface FloodgateClientOptions {
  /** Floodgate's GraphQL endpoint, e.g. "http://localhost:4000/graphql". */
  url: string;
  /** An API key's secret (a CHECKER key is enough). */
  token: string;
  /** Longest a call waits for Floodgate, from when it is made; default 100. */
  timeoutMs?: number;
  /** How a check is decided when Floodgate cannot be asked; default OPEN. */
  failureMode?: FailureMode;
  batch?: {
    /** Most checks in one request; default 100, at most 1000 (Floodgate's limit). */
    maxSize?: number;
    /** 0 (default): a batch closes when the event loop turns; more: up to this long after its first check. */
    maxWaitMs?: number;
    /** Requests meant to be in flight together: a closing batch of at least 16 checks is split by caller into those free to go (whole when none is); default 2, 1 for one request a batch. */
    parallel?: number;
  };
  /** The refusal cache: false turns it off; default 10,000 entries. */
  cache?: false | { maxEntries?: number };
  /** Connections to Floodgate (Node's pool); default 8. */
  connections?: number;
  /** LOCAL: how many processes share each rule's limit while Floodgate is unreachable; default 1. */
  instances?: number;
  /** A fetch function to send with instead of the runtime's default (Node: an undici Pool). */
  fetch?: FetchFunction;
}

/** What the caller can read of how its checks were decided. */
export interface ClientStats {
  /** Checks answered, by who answered. */
  decisions: { network: number; refusalCache: number; failureMode: number };
  /** Requests to Floodgate that failed, by how. Each sends its checks to the failure mode. */
  outages: { timeouts: number; unreachable: number; serverErrors: number };
  /** Checks that threw because Floodgate refused them (bad input, FORBIDDEN, UNAUTHENTICATED). */
  callerErrors: number;
  /** Requests sent with checks, and their mean number of checks. */
  batches: number;
  meanBatchSize: number;
  /** null when the cache is off; live: the push channel is listening, so the cache is in use. */
  refusalCache: { live: boolean; entries: number } | null;
}

/** Floodgate refused a call as the caller's fault (code as Floodgate says it), or the client could not make it. */
export class FloodgateError extends Error {
  constructor(
    message: string,
    /** Floodgate's extensions.code (BAD_USER_INPUT, FORBIDDEN, UNAUTHENTICATED...), or the client's own: BAD_USER_INPUT for a value of the wrong type, UNAVAILABLE, CLIENT_CLOSED, CLIENT_INTERNAL_ERROR (a fault of the client itself). */
    readonly code: string,
    /** For BAD_USER_INPUT: the field at fault, as the check names it ("request.ip"). */
    readonly field: string | null = null,
  ) {
    super(message);
    this.name = "FloodgateError";
  }
}

interface PendingCheck {
  request: CheckLimitsInput;
  resolve(decision: FloodgateDecision): void;
  reject(error: FloodgateError): void;
  /** The checkMany call it belongs to, whose checks travel in one request, in order; undefined for a check of its own. */
  group?: string;
}

interface Batch {
  tenantId: string;
  checks: PendingCheck[];
  /** When the first check's deadline passes (a monotonicMs() time). */
  deadlineAtMs: number;
  /** maxWaitMs's timer, when there is one. */
  timer: ReturnType<typeof setTimeout> | null;
}

type Outage = keyof ClientStats["outages"];

interface GraphQLBody<T> {
  data?: T | null;
  errors?: { message?: string; extensions?: { code?: string; field?: string } }[];
}

/** Floodgate's own faults, answered like a 5xx. */
const OUTAGE_CODES = new Set(["INTERNAL_SERVER_ERROR", "SERVICE_UNAVAILABLE"]);
/**
 * The fewest checks a part of a split batch holds: below this a request's own
 * cost (its headers, parsing, one round trip) outweighs what overlapping it
 * with another gains.
 */
const MIN_PART = 8;
/** Rule versions the RuleBook keeps: far more than the rules one backend's checks meet. */
const RULE_VERSIONS_KEPT = 10_000;
const BATCH_FIELD = /^requests\[(\d+)\]\.?(.*)$/;
/** Floodgate's codes for a refusal of the caller, which every check of a batch (one tenant's) shares. */
const CALLER_CODES: ReadonlySet<string> = new Set(["UNAUTHENTICATED", "FORBIDDEN"]);
/**
 * Floodgate refused the client's document, not a check: it fails every check
 * alike, and sent again one by one each would only fail again. An older
 * Floodgate answers so to a field it does not know (docs/client.md).
 */
const DOCUMENT_CODES: ReadonlySet<string> = new Set(["GRAPHQL_PARSE_FAILED", "GRAPHQL_VALIDATION_FAILED"]);
/** GraphQL's words for an input field the schema lacks: what an older Floodgate answers a field newer than it (cookie, ignorePathCase). */
const UNKNOWN_INPUT_FIELD = /Field "(\w+)" is not defined by type "CheckLimitsInput"/;
/** What Floodgate answers a body over its MAX_BODY_BYTES, as a proxy in front of it may too. */
const PAYLOAD_TOO_LARGE = 413;
/** A proxy's 413, which says nothing Floodgate would, as the error a check too large even alone fails with. */
const PROXY_TOO_LARGE: GraphQLBody<never> = {
  errors: [{ message: "the request body is larger than a proxy in front of Floodgate accepts (HTTP 413)", extensions: { code: "BAD_REQUEST" } }],
};

/** Whole milliseconds on a clock that only moves forward, unlike Date.now() (stepped by NTP, a VM resumed): what the refusal cache counts waits on. */
const tickMs = (): number => Math.floor(monotonicMs());

/** Runs `task` once the event loop has turned (setImmediate where the runtime has it: after the I/O of this turn). */
const afterThisTurn: (task: () => void) => void =
  typeof setImmediate === "function" ? (task) => void setImmediate(task) : (task) => void setTimeout(task, 0);

export class FloodgateClient {
  private readonly transport: Transport;
  private readonly timeoutMs: number;
  private readonly failureMode: FailureMode;
  private readonly maxSize: number;
  private readonly maxWaitMs: number;
  private readonly parallel: number;
  private readonly cache: RefusalCache | null;
  private readonly feed: InvalidationFeed | null;
  private readonly local: LocalLimiter | null;
  private readonly rules = new RuleBook(RULE_VERSIONS_KEPT);
  private readonly open = new Map<string, Batch>();
  /** Batches sent and not yet answered, for close() to wait for. */
  private readonly inFlight = new Set<Promise<void>>();
  private turnScheduled = false;
  private degraded = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  /** checkMany calls so far: each one's checks are a group (PendingCheck.group). */
  private groups = 0;
  /** checkMany calls not yet decided, for close() to wait for. */
  private readonly manyInProgress = new Set<Promise<void>>();
  private readonly counts = {
    network: 0,
    refusalCache: 0,
    failureMode: 0,
    timeouts: 0,
    unreachable: 0,
    serverErrors: 0,
    callerErrors: 0,
    batches: 0,
    batchedChecks: 0,
  };

  constructor(options: FloodgateClientOptions) {
    const url = endpoint(options.url);
    if (typeof options.token !== "string" || options.token.trim() === "") throw new TypeError("FloodgateClient: options.token must be an API key's secret");
    this.timeoutMs = wholeNumber("timeoutMs", options.timeoutMs, 100, 1, 600_000);
    this.failureMode = failureModeOf(options.failureMode);
    this.maxSize = wholeNumber("batch.maxSize", options.batch?.maxSize, 100, 1, MAX_BATCH);
    this.maxWaitMs = wholeNumber("batch.maxWaitMs", options.batch?.maxWaitMs, 0, 0, 60_000);
    // The wait comes out of the checks' deadline: a batch that waited it out would never be sent, every check
    // decided by the failure mode (with OPEN, no limit at all) while Floodgate was up.
    if (this.maxWaitMs >= this.timeoutMs) {
      throw new TypeError(`FloodgateClient: options.batch.maxWaitMs must be less than timeoutMs (${this.timeoutMs}): a batch waits out of its checks' deadline (got ${this.maxWaitMs})`);
    }
    this.parallel = wholeNumber("batch.parallel", options.batch?.parallel, 2, 1, 64);
    const connections = wholeNumber("connections", options.connections, 8, 1, 1024);
    const instances = wholeNumber("instances", options.instances, 1, 1, 1_000_000);
    const authorization = `Bearer ${options.token}`;
    const transportOptions = { url, authorization, connections };
    this.transport = options.fetch ? fetchTransport(options.fetch, transportOptions) : platform.transport(transportOptions);

    if (this.failureMode === "LOCAL") {
      if (platform.LocalLimiter === null) throw new TypeError('FloodgateClient: options.failureMode "LOCAL" needs Node (node:crypto, node:net); use OPEN or CLOSED here');
      this.local = new platform.LocalLimiter({ instances, maxBuckets: 100_000 });
    } else {
      this.local = null;
    }

    const cache = options.cache;
    if (cache === false || platform.WebSocket === null) {
      this.cache = null;
      this.feed = null;
    } else {
      this.cache = new RefusalCache(wholeNumber("cache.maxEntries", cache?.maxEntries, 10_000, 1, 10_000_000));
      this.feed = new InvalidationFeed({ url, authorization, WebSocket: platform.WebSocket, cache: this.cache, query: INVALIDATIONS });
    }
  }

  /** Decides one check. Resolves with a decision even when Floodgate is down; throws FloodgateError only for the caller's own faults. */
  check(request: CheckLimitsInput): Promise<FloodgateDecision> {
    if (this.closed) return Promise.reject(new FloodgateError("the client is closed", "CLIENT_CLOSED"));
    const input = this.typed(request);
    if (input instanceof FloodgateError) return Promise.reject(input);
    const remembered = this.remembered(input);
    if (remembered !== null) return Promise.resolve(remembered);
    return new Promise((resolve, reject) => this.enqueue({ request: input, resolve, reject }, monotonicMs() + this.timeoutMs));
  }

  /**
   * Decides several checks as one by one, in order: the checks of a tenant
   * travel together in one request, in the order given, never split between
   * two requests that Floodgate could apply the other way round (two checks
   * of one user from two addresses share the user's bucket). More than
   * batch.maxSize of a tenant's go in requests sent one after another. They
   * share requests with any other checks of the moment.
   */
  checkMany(requests: readonly CheckLimitsInput[]): Promise<FloodgateDecision[]> {
    if (this.closed) return Promise.reject(new FloodgateError("the client is closed", "CLIENT_CLOSED"));
    // Made before close(): close() waits for all of it, its later parts sent as its first was.
    const deciding = this.decideMany(requests, monotonicMs() + this.timeoutMs);
    const settled = deciding.then(ignore, ignore);
    this.manyInProgress.add(settled);
    void settled.finally(() => this.manyInProgress.delete(settled));
    return deciding;
  }

  /** checkMany's work: every part under the one deadline the call was given (`deadlineAtMs`), however many parts it takes. */
  private async decideMany(requests: readonly CheckLimitsInput[], deadlineAtMs: number): Promise<FloodgateDecision[]> {
    const group = `many:${++this.groups}`;
    const byTenant = new Map<string, number[]>();
    requests.forEach(({ tenantId }, i) => {
      const indexes = byTenant.get(tenantId);
      if (indexes === undefined) byTenant.set(tenantId, [i]);
      else indexes.push(i);
    });
    const decisions: FloodgateDecision[] = new Array(requests.length);
    await Promise.all(
      [...byTenant.values()].map(async (indexes) => {
        for (let at = 0; at < indexes.length; at += this.maxSize) {
          const part = indexes.slice(at, at + this.maxSize);
          // A later part is due at the call's deadline, earlier than a check made now: it goes at once, so that no
          // check made meanwhile joins its batch and is sent (or decided by failure mode) on that earlier deadline.
          const decided = await Promise.all(this.enqueueTogether(part.map((i) => requests[i]!), group, deadlineAtMs, at > 0));
          part.forEach((i, j) => (decisions[i] = decided[j]!));
        }
      }),
    );
    return decisions;
  }

  /** The refusal cache's answer to a check, counted; null when it has none. */
  private remembered(request: CheckLimitsInput): FloodgateDecision | null {
    const remembered = this.cache?.refusal(request, Date.now(), tickMs()) ?? null;
    if (remembered !== null) this.counts.refusalCache++;
    return remembered;
  }

  /** Forgets one bucket of a rule (resetLimit), here at once and everywhere through Floodgate. Throws FloodgateError UNAVAILABLE when Floodgate cannot be asked. */
  async resetLimit(ruleId: string, key: string): Promise<boolean> {
    if (this.closed) throw new FloodgateError("the client is closed", "CLIENT_CLOSED");
    const body = JSON.stringify({ query: RESET_LIMIT, variables: { ruleId, key } });
    const answer = await this.post<FloodgateResetLimitMutation>(body, monotonicMs() + this.timeoutMs);
    if ("outage" in answer) throw new FloodgateError(`Floodgate could not be asked to reset the bucket (${answer.outage})`, "UNAVAILABLE");
    const { data, errors } = answer.body;
    if (data?.resetLimit === undefined) throw errorOf(errors);
    this.cache?.forgetBucket(ruleId, key);
    return data.resetLimit;
  }

  /**
   * Frees the slots of a CONCURRENCY lease (decision.lease.id) once the
   * request it admitted has ended: true when any was still held, false when
   * none was (released already, expired). Throws FloodgateError UNAVAILABLE
   * when Floodgate cannot be asked; the lease then frees itself at its
   * expiresAt.
   */
  async releaseLease(id: string): Promise<boolean> {
    if (this.closed) throw new FloodgateError("the client is closed", "CLIENT_CLOSED");
    const body = JSON.stringify({ query: RELEASE_LEASE, variables: { id } });
    const answer = await this.post<FloodgateReleaseLeaseMutation>(body, monotonicMs() + this.timeoutMs);
    if ("outage" in answer) throw new FloodgateError(`Floodgate could not be asked to release the lease (${answer.outage})`, "UNAVAILABLE");
    const { data, errors } = answer.body;
    if (data?.releaseLease === undefined) throw errorOf(errors);
    return data.releaseLease;
  }

  stats(): ClientStats {
    const c = this.counts;
    return {
      decisions: { network: c.network, refusalCache: c.refusalCache, failureMode: c.failureMode },
      outages: { timeouts: c.timeouts, unreachable: c.unreachable, serverErrors: c.serverErrors },
      callerErrors: c.callerErrors,
      batches: c.batches,
      meanBatchSize: c.batches === 0 ? 0 : c.batchedChecks / c.batches,
      refusalCache: this.cache === null ? null : { live: this.cache.isLive, entries: this.cache.size },
    };
  }

  /**
   * Sends what is gathered, waits for what is in flight, and closes the
   * connections and the push channel. Every call waits for all of it: a
   * second close() (two parts of a program shutting down) that returned at
   * once would let its caller go on while checks are still in flight.
   */
  close(): Promise<void> {
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.closed = true;
    for (const batch of [...this.open.values()]) void this.flush(batch);
    await Promise.all([...this.manyInProgress]);
    await Promise.all([...this.inFlight]);
    await this.feed?.close();
    await this.transport.close();
  }

  /**
   * Puts checks of one tenant in one batch, in order (the batch open for
   * the tenant sent first when they do not fit beside its checks), marked as
   * a group that no split divides, due at `deadlineAtMs`; `sendNow`: their
   * batch is sent at once rather than when the turn ends. Checks its refusal
   * cache answers are answered at once: a refusal counts nothing, so it
   * cannot change what the others are decided.
   */
  private enqueueTogether(requests: readonly CheckLimitsInput[], group: string, deadlineAtMs: number, sendNow: boolean): Promise<FloodgateDecision>[] {
    const decided: Promise<FloodgateDecision>[] = [];
    const checks: PendingCheck[] = [];
    for (const request of requests) {
      const input = this.typed(request);
      if (input instanceof FloodgateError) {
        decided.push(Promise.reject(input));
        continue;
      }
      const remembered = this.remembered(input);
      if (remembered !== null) decided.push(Promise.resolve(remembered));
      else decided.push(new Promise((resolve, reject) => checks.push({ request: input, resolve, reject, group })));
    }
    const open = checks.length === 0 ? undefined : this.open.get(checks[0]!.request.tenantId);
    if (open !== undefined && open.checks.length + checks.length > this.maxSize) void this.flush(open);
    for (const check of checks) this.enqueue(check, deadlineAtMs);
    const batch = sendNow && checks.length > 0 ? this.open.get(checks[0]!.request.tenantId) : undefined;
    if (batch !== undefined) void this.flush(batch);
    return decided;
  }

  /** The request as sent, or the FloodgateError (BAD_USER_INPUT, counted) for a value of the wrong type: see inputOf. */
  private typed(request: CheckLimitsInput): CheckLimitsInput | FloodgateError {
    const input = inputOf(request);
    if (input instanceof FloodgateError) this.counts.callerErrors++;
    return input;
  }

  /**
   * Puts a check in its tenant's open batch, or opens one. A batch is due at
   * its first check's deadline; a check due earlier (a later part of a
   * checkMany, whose deadline is its call's) sends the open batch first
   * and opens its own, so that no check waits past its deadline.
   */
  private enqueue(check: PendingCheck, deadlineAtMs: number): void {
    const { tenantId } = check.request;
    let batch = this.open.get(tenantId);
    if (batch !== undefined && deadlineAtMs < batch.deadlineAtMs) {
      void this.flush(batch);
      batch = undefined;
    }
    if (batch === undefined) {
      batch = { tenantId, checks: [], deadlineAtMs, timer: null };
      this.open.set(tenantId, batch);
      if (this.maxWaitMs > 0) {
        const waiting = batch;
        batch.timer = setTimeout(() => void this.flush(waiting), Math.min(this.maxWaitMs, Math.max(0, deadlineAtMs - monotonicMs())));
      } else if (!this.turnScheduled) {
        this.turnScheduled = true;
        afterThisTurn(() => {
          this.turnScheduled = false;
          for (const open of [...this.open.values()]) void this.flush(open);
        });
      }
    }
    batch.checks.push(check);
    if (batch.checks.length >= this.maxSize) void this.flush(batch);
  }

  /**
   * Sends, once the callers just answered have run, the batches they opened
   * (see the header): the microtask queued here runs after theirs, which the
   * answers' resolutions queued before it. A batch waiting for maxWaitMs
   * keeps waiting.
   */
  private flushAnswered(): void {
    if (this.maxWaitMs > 0) return;
    queueMicrotask(() => {
      for (const open of [...this.open.values()]) void this.flush(open);
    });
  }

  /** Closes a batch and sends it, split by caller into as many parts of MIN_PART checks or more as requests are free to go (see the header). */
  private flush(batch: Batch): Promise<void> {
    if (this.open.get(batch.tenantId) === batch) this.open.delete(batch.tenantId);
    if (batch.timer !== null) clearTimeout(batch.timer);
    batch.timer = null;
    const freeSlots = Math.max(1, this.parallel - this.inFlight.size);
    const sent = splitByCaller(batch.checks, Math.min(freeSlots, Math.floor(batch.checks.length / MIN_PART))).map((part) => {
      // Nothing a batch meets may leave its checks unsettled or its rejection unhandled (the flushes are not awaited).
      const sending = this.send(part, batch.deadlineAtMs).catch((error: unknown) => {
        const failed = new FloodgateError(`the client could not decide the check: ${error instanceof Error ? error.message : String(error)}`, "CLIENT_INTERNAL_ERROR");
        for (const check of part) check.reject(failed);
      });
      this.inFlight.add(sending);
      return sending.finally(() => this.inFlight.delete(sending));
    });
    return Promise.all(sent).then(() => undefined);
  }

  private async send(checks: PendingCheck[], deadlineAtMs: number): Promise<void> {
    if (checks.length === 0) return;
    // Due already (its batch waited out the deadline): sent now, Floodgate could count checks the caller is told were decided without it.
    if (monotonicMs() >= deadlineAtMs) return this.byFailureMode(checks, "timeouts");
    // Every value of the types inputOf let through: JSON writes it.
    const requests = JSON.stringify(checks.map((c) => c.request));
    this.counts.batches++;
    this.counts.batchedChecks += checks.length;
    const mark = this.cache?.mark() ?? -1;
    const sentAtTickMs = tickMs();
    const tenantId = checks[0]!.request.tenantId;
    const inFull = !this.rules.hasMet(tenantId);
    const prefix = inFull ? CHECKS_IN_FULL_PREFIX : CHECKS_PREFIX;
    const answer = await this.post<FloodgateChecksQuery | FloodgateChecksInFullQuery>(prefix + requests + "}}", deadlineAtMs);
    if ("outage" in answer) return this.byFailureMode(checks, answer.outage);
    const decisions = answer.body.data?.checkLimitsBatch;
    if (decisions?.length === checks.length) {
      this.degraded = false;
      // In full: the decisions as handed back, their rules learnt; else named by alias, their rules by id and version (rule-book.ts).
      const inFullDecisions = inFull ? (decisions as FloodgateChecksInFullQuery["checkLimitsBatch"]) : null;
      const wires = inFull ? null : (decisions as FloodgateChecksQuery["checkLimitsBatch"]);
      if (inFullDecisions !== null) this.rules.learn(tenantId, inFullDecisions);
      const completed: (FloodgateDecision | null)[] = inFullDecisions ?? wires!.map((wire) => this.rules.complete(wire));
      const unknown = checks.filter((_, i) => completed[i] === null);
      const outage = unknown.length === 0 ? null : await this.learnRules(unknown, deadlineAtMs);
      const unresolved: PendingCheck[] = [];
      for (const [i, check] of checks.entries()) {
        const decision = completed[i] ?? (wires === null ? null : this.rules.complete(wires[i]!));
        if (decision === null) {
          unresolved.push(check);
          continue;
        }
        this.counts.network++;
        this.local?.learn(check.request, decision);
        this.cache?.learn(check.request, decision, sentAtTickMs, mark);
        check.resolve(decision);
      }
      this.flushAnswered();
      // The dry runs got no answer, or a rule changed again before them: the decision's rule cannot be told.
      if (unresolved.length > 0) this.byFailureMode(unresolved, outage ?? "serverErrors");
      return;
    }
    const error = errorOf(answer.body.errors);
    if (OUTAGE_CODES.has(error.code)) return this.byFailureMode(checks, "serverErrors");
    if (CALLER_CODES.has(error.code) || DOCUMENT_CODES.has(error.code)) return this.failAll(checks, error);
    if (answer.status === PAYLOAD_TOO_LARGE) return this.inHalves(checks, error, deadlineAtMs);
    const unknown = error.code === "BAD_USER_INPUT" ? UNKNOWN_INPUT_FIELD.exec(error.message) : null;
    if (unknown !== null) return this.withoutUnknownField(checks, unknown[1]!, error, deadlineAtMs);
    return this.isolate(checks, error, deadlineAtMs);
  }

  /**
   * Floodgate does not know an input field (it is older than the client):
   * every check that sends it fails at once, naming it, and the others are
   * sent again together; one by one, each check that sends it would fail again.
   */
  private async withoutUnknownField(checks: PendingCheck[], field: string, error: FloodgateError, deadlineAtMs: number): Promise<void> {
    const sends = (check: PendingCheck) => (check.request as Record<string, unknown>)[field] !== undefined;
    const failing = checks.filter(sends);
    if (failing.length === 0) return this.isolate(checks, error, deadlineAtMs);
    // Not Floodgate's words: they quote the first such check's values (its API key, its cookie) to every caller.
    this.failAll(failing, new FloodgateError(`Floodgate does not know the input field "${field}": it is older than this client (upgrade Floodgate first)`, error.code, `request.${field}`));
    const others = checks.filter((check) => !sends(check));
    if (others.length > 0) await this.send(others, deadlineAtMs);
  }

  /** Floodgate refused the caller, not one check (the key, revoked or unknown, or its right to the batch's one tenant), or the client's document. Each check of the batch fails alike; sent again one by one, each would only be refused again. */
  private failAll(checks: readonly PendingCheck[], error: FloodgateError): void {
    this.counts.callerErrors += checks.length;
    for (const check of checks) check.reject(error);
  }

  /** Asks for the rules of these checks' decisions: the same checks as dry runs, which count nothing (rule-book.ts). */
  private async learnRules(checks: readonly PendingCheck[], deadlineAtMs: number): Promise<Outage | null> {
    const dryRuns = checks.map((check) => ({ ...check.request, dryRun: true }));
    const answer = await this.post<FloodgateRulesQuery>(RULES_PREFIX + JSON.stringify(dryRuns) + "}}", deadlineAtMs);
    if ("outage" in answer) return answer.outage;
    this.rules.learn(checks[0]!.request.tenantId, answer.body.data?.checkLimitsBatch ?? []);
    return null;
  }

  /**
   * Floodgate refused the whole batch for one check's fault (and counted
   * nothing of it): that check fails with the error, and the others are sent
   * again, without it; one at a time when the error does not say which it is.
   */
  private async isolate(checks: PendingCheck[], error: FloodgateError, deadlineAtMs: number): Promise<void> {
    const index = error.field === null ? null : BATCH_FIELD.exec(error.field);
    const faulty = index === null ? (checks.length === 1 ? 0 : -1) : Number(index[1]);
    if (faulty >= 0 && faulty < checks.length) {
      this.counts.callerErrors++;
      // The batch's field ("requests[3].ip") as the check's own ("request.ip").
      const field = index === null ? error.field : `request.${index[2]}`.replace(/\.$/, "");
      checks[faulty]!.reject(new FloodgateError(error.message.replace(`requests[${faulty}]`, "request"), error.code, field));
      if (checks.length === 1) return;
      await this.send(
        checks.filter((_, i) => i !== faulty),
        deadlineAtMs,
      );
      return;
    }
    await Promise.all(checks.map((check) => this.send([check], deadlineAtMs)));
  }

  /**
   * Floodgate refused the batch's body as too large (413: over its
   * MAX_BODY_BYTES) and counted nothing: each half is sent again on its own,
   * one after the other (checkMany's checks are decided in their order), and
   * so on down until a part fits; a check still too large alone fails with
   * the error. Sending each check alone instead took a request a check.
   */
  private async inHalves(checks: PendingCheck[], error: FloodgateError, deadlineAtMs: number): Promise<void> {
    if (checks.length === 1) {
      this.counts.callerErrors++;
      checks[0]!.reject(error);
      return;
    }
    const half = Math.ceil(checks.length / 2);
    await this.send(checks.slice(0, half), deadlineAtMs);
    await this.send(checks.slice(half), deadlineAtMs);
  }

  private byFailureMode(checks: readonly PendingCheck[], outage: Outage): void {
    this.counts[outage]++;
    if (!this.degraded) {
      // A new outage: LOCAL starts from empty counters, as Floodgate's own moved on since the last one.
      this.degraded = true;
      this.local?.reset();
    }
    const nowMs = Date.now();
    for (const check of checks) {
      if (this.local === null) {
        this.counts.failureMode++;
        check.resolve(ruleLessDecision(this.failureMode === "OPEN", nowMs));
        continue;
      }
      try {
        const decision = this.local.decide(check.request, nowMs);
        this.counts.failureMode++;
        check.resolve(decision);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        this.counts.callerErrors++;
        check.reject(new FloodgateError(error.message, "BAD_USER_INPUT", error.field));
      }
    }
  }

  /** One POST under the deadline: Floodgate's answer, or which kind of outage kept it from answering. */
  private async post<T>(body: string, deadlineAtMs: number): Promise<{ body: GraphQLBody<T>; status: number } | { outage: Outage }> {
    let answer: TransportAnswer;
    try {
      answer = await this.transport.post(body, deadlineAtMs);
    } catch (error) {
      // Given up at the deadline, or refused, reset, not resolved: no answer.
      return { outage: error instanceof DeadlineExceeded ? "timeouts" : "unreachable" };
    }
    if (answer.status >= 500) return { outage: "serverErrors" };
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(answer.text);
    } catch {
      // Not Floodgate answering (a proxy's error page, say): below.
    }
    // JSON but not a GraphQL response (null, a number, a list: a proxy's) is no answer either: reading its data threw, leaving the checks unsettled.
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return { body: parsed as GraphQLBody<T>, status: answer.status };
    // A proxy in front of Floodgate refusing the body as too large (nginx's client_max_body_size is 1 MB unless set): halved like Floodgate's own 413.
    if (answer.status === PAYLOAD_TOO_LARGE) return { body: PROXY_TOO_LARGE, status: answer.status };
    return { outage: "serverErrors" };
  }
}

/**
 * A document's text as sent: whitespace folded away. The client's documents
 * hold no string literals, so only the spaces between names remain.
 */
function compact(document: string): string {
  return document
    .replace(/\s+/g, " ")
    .replace(/ ?([{}():,!=[\]$@]|\.\.\.) ?/g, "$1")
    .trim();
}

/** The start of a batch's body, up to its checks. */
function batchPrefix(document: string): string {
  return `{"query":${JSON.stringify(compact(document))},"variables":{"requests":`;
}

const CHECKS_PREFIX = batchPrefix(String(FloodgateChecksDocument));
const CHECKS_IN_FULL_PREFIX = batchPrefix(String(FloodgateChecksInFullDocument));
const RULES_PREFIX = batchPrefix(String(FloodgateRulesDocument));
const RESET_LIMIT = compact(String(FloodgateResetLimitDocument));
const RELEASE_LEASE = compact(String(FloodgateReleaseLeaseDocument));
const INVALIDATIONS = compact(String(FloodgateInvalidationsDocument));

/** The checks in up to `parts` parts, each caller's checks in one part, in their order; no part empty. */
function splitByCaller(checks: PendingCheck[], parts: number): PendingCheck[][] {
  if (parts <= 1) return [checks];
  const split: PendingCheck[][] = Array.from({ length: parts }, () => []);
  for (const check of checks) {
    const { userId, ip, apiKey, cookie, userAgent } = check.request;
    split[fnv1a(check.group ?? `${userId ?? ""}\u0000${ip ?? ""}\u0000${apiKey ?? ""}\u0000${cookie ?? ""}\u0000${userAgent ?? ""}`) % parts]!.push(check);
  }
  return split.filter((part) => part.length > 0);
}

/**
 * The check as sent: only its fields of CheckLimitsInput (a caller's extra
 * properties cannot fail the batch), each of the type the schema gives it,
 * or the BAD_USER_INPUT naming the first that is not. A
 * JavaScript caller's `userId: 42` or `cost: 1.5` fails here, alone: sent,
 * GraphQL refused the whole batch without naming the check, and LOCAL's
 * limiter, which reads the fields as the types say, threw.
 */
function inputOf(r: CheckLimitsInput): CheckLimitsInput | FloodgateError {
  if (typeof r !== "object" || r === null) return new FloodgateError("request must be a CheckLimitsInput object", "BAD_USER_INPUT", "request");
  if (typeof r.tenantId !== "string") return wrongType("tenantId", "a string", r.tenantId);
  for (const field of ["userId", "ip", "apiKey", "userAgent", "cookie", "resource", "method"] as const) {
    if (r[field] !== undefined && r[field] !== null && typeof r[field] !== "string") return wrongType(field, "a string", r[field]);
  }
  if (r.cost !== undefined && r.cost !== null && !(Number.isInteger(r.cost) && Math.abs(r.cost) <= INT_MAX)) return wrongType("cost", "an integer", r.cost);
  for (const field of ["dryRun", "ignorePathCase"] as const) {
    if (r[field] !== undefined && r[field] !== null && typeof r[field] !== "boolean") return wrongType(field, "a boolean", r[field]);
  }
  if (r.attributes !== undefined && r.attributes !== null) {
    if (!Array.isArray(r.attributes)) return wrongType("attributes", "a list of { key, value }", r.attributes);
    const at = r.attributes.findIndex((a: unknown) => typeof a !== "object" || a === null || typeof (a as { key?: unknown }).key !== "string" || typeof (a as { value?: unknown }).value !== "string");
    if (at !== -1) return wrongType(`attributes[${at}]`, "{ key, value }, both strings", r.attributes[at]);
  }
  return {
    tenantId: r.tenantId,
    userId: r.userId,
    ip: r.ip,
    apiKey: r.apiKey,
    userAgent: r.userAgent,
    cookie: r.cookie,
    resource: r.resource,
    method: r.method,
    cost: r.cost,
    dryRun: r.dryRun,
    attributes: r.attributes?.map(({ key, value }) => ({ key, value })),
    ignorePathCase: r.ignorePathCase,
  };
}

/** GraphQL's Int: 32 bits, signed. */
const INT_MAX = 2_147_483_647;

function wrongType(field: string, type: string, value: unknown): FloodgateError {
  const got = typeof value === "bigint" ? `${value}n` : typeof value === "string" ? JSON.stringify(value.slice(0, 40)) : String(value);
  return new FloodgateError(`request.${field} must be ${type} (got ${got})`, "BAD_USER_INPUT", `request.${field}`);
}

function ignore(): void {}

function errorOf(errors: GraphQLBody<unknown>["errors"]): FloodgateError {
  const first = errors?.[0];
  return new FloodgateError(first?.message ?? "Floodgate answered without data or errors", first?.extensions?.code ?? "INTERNAL_SERVER_ERROR", first?.extensions?.field ?? null);
}

function endpoint(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`FloodgateClient: options.url must be an http(s) URL (got ${JSON.stringify(url)})`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new TypeError(`FloodgateClient: options.url must be an http(s) URL (got ${JSON.stringify(url)})`);
  return parsed;
}

function wholeNumber(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new TypeError(`FloodgateClient: options.${name} must be an integer from ${min} to ${max} (got ${value})`);
  return value;
}

function failureModeOf(mode: FailureMode | undefined): FailureMode {
  if (mode === undefined) return "OPEN";
  if (mode !== "OPEN" && mode !== "CLOSED" && mode !== "LOCAL") throw new TypeError(`FloodgateClient: options.failureMode must be OPEN, CLOSED or LOCAL (got ${JSON.stringify(mode)})`);
  return mode;
}
