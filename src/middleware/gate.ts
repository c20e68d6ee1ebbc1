/**
 * What the Express, Fastify and fetch middlewares share: an HTTP request
 * turned into a check, and the decision turned into what to do with the
 * request. Framework-free: each adapter gives a view of its request and acts
 * on the verdict.
 *
 * The check, from the request, each part overridable by an extractor:
 *   ip         the socket's address; X-Forwarded-For only with trustProxy
 *              (never by default: anyone can send it). trustProxy: n trusts
 *              n proxies in front, so the address the n-th one saw is taken,
 *              counting from ours; true trusts every hop (only behind a proxy
 *              that replaces the header). Where the runtime does not tell
 *              the peer (fetch runtimes), the walk starts at the header's end
 *              all the same: trustProxy says a proxy wrote it.
 *   userAgent  User-Agent
 *   apiKey     the bearer token of Authorization, or the header apiKeyHeader names
 *   cookie     the value of the cookie cookieName names (none by default)
 *   method     the method, when Floodgate knows it (HTTP_METHODS); none for
 *              others (PURGE, PROPFIND...), which rules for any method still count
 *   resource   the path without its query string, as the app's router
 *              matches it: percent-escapes decoded as the routers decode
 *              them, dot segments kept (see resourceOf); with ignorePathCase
 *              when the router ignores letter case
 *   tenantId   a constant or a function of the request
 * Values from the request are made to fit what Floodgate accepts (no
 * control characters, addresses it parses, methods it knows, a path or user
 * agent cut at its length, a longer token or cookie stood for by its digest:
 * see fitted), so no request can make a check fail.
 *
 * The verdict: headers to set on the response either way; on denial a 429
 * with an RFC 9457 problem details body, or a 403 for a request on a deny
 * list (reason DENY_LISTED: no Retry-After unless the entry expires; the
 * body says "access denied" and nothing of the list, whose entry the
 * decision's reason names for the server's own log); THROTTLE's delay to
 * wait before going on; LOG_ONLY goes on. Paths on the skip list are not checked.
 *
 * A request admitted by CONCURRENCY rules holds a lease (decision.lease)
 * while it is in flight; each adapter hands it back with `release` when the
 * response has ended (or the connection closed), so that a slot is held
 * exactly as long as its request.
 */

import { FloodgateClient, type FloodgateClientOptions, type FloodgateDecision, type HttpHeader } from "../client/index.js";
import type { CheckLimitsInput } from "../client/generated/operations.js";
import { withoutQueryOrFragment } from "../domain/glob.js";
import { HTTP_METHODS } from "../domain/rule.js";

/** What the gate reads of a request, whatever the framework. */
export interface RequestView {
  method: string;
  /** The path, with its query string if any (absolute URLs are accepted too). */
  url: string;
  /** A header's value by its lower-case name. */
  header(name: string): string | undefined;
  /** The peer's address, where the runtime tells it. */
  remoteAddress: string | undefined;
}

type Extractor<Req, T> = (request: Req) => T | null | undefined;

export interface GateOptions<Req> {
  /** A client to check with; or, instead, the client's options (url, token, failureMode...) and the gate makes one. */
  client?: FloodgateClient;
  /** The tenant of every request, or a function of the request. */
  tenant: string | ((request: Req) => string);
  /** Whether to believe X-Forwarded-For: false (default), the number of proxies in front of this server, or true for all. */
  trustProxy?: boolean | number;
  /** Header carrying the caller's API key (e.g. "x-api-key"); default: the bearer token of Authorization. */
  apiKeyHeader?: string;
  /** Cookie whose value joins the CLIENT fingerprint (e.g. "session"); default none. */
  cookieName?: string;
  /**
   * Whether the app's router ignores letter case, routing "/API/Orders" to
   * "/api/orders": Floodgate then compares the path with rules' globs without
   * regard to case, and an ENDPOINT bucket counts every spelling as one
   * (CheckLimitsInput.ignorePathCase). Default: what the adapter's router
   * does. floodgate/express: true, as every express.Router ignores case
   * unless made caseSensitive itself (the app's "case sensitive routing"
   * reaches only the app's own routes); in a case-sensitive app a path that
   * differs only in case is then counted under its lower-cased twin's rules,
   * an extra count, never a request let through. floodgate/fastify: false
   * unless its router's caseSensitive is off. floodgate/fetch: false.
   */
  ignorePathCase?: boolean;
  /** Overrides of how each part of the check is read from the request. */
  extract?: {
    ip?: Extractor<Req, string>;
    userId?: Extractor<Req, string>;
    apiKey?: Extractor<Req, string>;
    userAgent?: Extractor<Req, string>;
    cookie?: Extractor<Req, string>;
    method?: Extractor<Req, string>;
    resource?: Extractor<Req, string>;
    cost?: Extractor<Req, number>;
  };
  /** Requests not to check: exact paths or patterns (health checks), or a test. */
  skip?: readonly (string | RegExp)[] | ((request: Req) => boolean);
  /** The problem type URI of the 429 body; default "about:blank" (RFC 9457: the status says it all). */
  problemType?: string;
}

export type MiddlewareOptions<Req> = GateOptions<Req> & Partial<FloodgateClientOptions>;

export type Verdict =
  | { kind: "skip" }
  | { kind: "pass"; decision: FloodgateDecision; headers: HttpHeader[]; delayMs: number }
  | { kind: "deny"; decision: FloodgateDecision; status: 429 | 403; headers: HttpHeader[]; body: string };

export interface Gate<Req> {
  readonly client: FloodgateClient;
  /** Checks the request (unless skipped) and says what to do with it. Rejects only with the client's FloodgateError (a caller's fault, never an outage). */
  decide(request: Req): Promise<Verdict>;
  /**
   * Releases the decision's lease, if it has one. Never rejects: a release
   * Floodgate cannot be asked for leaves the lease to free itself at its
   * expiresAt.
   */
  release(decision: FloodgateDecision): Promise<void>;
  /** Closes the client if the gate made it. */
  close(): Promise<void>;
}

/** Floodgate's limits on what a check carries (src/domain/request.ts). */
const MAX = { identifier: 256, userAgent: 1024, cookie: 4096, resource: 2048 } as const;
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/**
 * What Floodgate's node:net isIP accepts (the same expressions as Node's
 * lib/internal/net.js, which fetch runtimes lack): a hop of X-Forwarded-For
 * that merely looks like an address ("1.2.3.256", ":::") failed the check.
 */
const V4_PART = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
const V4 = `(?:${V4_PART}\\.){3}${V4_PART}`;
const V6_PART = "(?:[0-9a-fA-F]{1,4})";
const IPV4 = new RegExp(`^${V4}$`);
const IPV6 = new RegExp(
  "^(?:" +
    `(?:${V6_PART}:){7}(?:${V6_PART}|:)|` +
    `(?:${V6_PART}:){6}(?:${V4}|:${V6_PART}|:)|` +
    `(?:${V6_PART}:){5}(?::${V4}|(?::${V6_PART}){1,2}|:)|` +
    `(?:${V6_PART}:){4}(?:(?::${V6_PART}){0,1}:${V4}|(?::${V6_PART}){1,3}|:)|` +
    `(?:${V6_PART}:){3}(?:(?::${V6_PART}){0,2}:${V4}|(?::${V6_PART}){1,4}|:)|` +
    `(?:${V6_PART}:){2}(?:(?::${V6_PART}){0,3}:${V4}|(?::${V6_PART}){1,5}|:)|` +
    `(?:${V6_PART}:){1}(?:(?::${V6_PART}){0,4}:${V4}|(?::${V6_PART}){1,6}|:)|` +
    `(?::(?:(?::${V6_PART}){0,5}:${V4}|(?::${V6_PART}){1,7}|:))` +
    ")(?:%[0-9a-zA-Z-.:]{1,})?$",
);
/** Floodgate's longest ip (LENGTHS.ip): an address with its zone id. */
const MAX_IP = 64;
const METHODS: ReadonlySet<string> = new Set(HTTP_METHODS);
const SKIP = Object.freeze({ kind: "skip" }) as Verdict;

/** `routerIgnoresCase`: whether the adapter's router ignores letter case, the default of options.ignorePathCase. */
export function createGate<Req>(options: MiddlewareOptions<Req>, view: (request: Req) => RequestView, routerIgnoresCase = false): Gate<Req> {
  const owned = options.client === undefined;
  const client = options.client ?? new FloodgateClient(clientOptions(options));
  const { tenant, extract = {}, apiKeyHeader, cookieName, ignorePathCase = routerIgnoresCase } = options;
  const hops = trustedHops(options.trustProxy);
  const skipped = skipTest(options.skip, view);
  const problemType = options.problemType ?? "about:blank";

  const checkOf = async (request: Req): Promise<CheckLimitsInput> => {
    const v = view(request);
    const path = resourceOf(pathOf(v.url));
    const authorization = v.header("authorization");
    return {
      tenantId: typeof tenant === "function" ? tenant(request) : tenant,
      ip: extract.ip?.(request) ?? clientIp(v, hops),
      userId: extract.userId?.(request),
      apiKey: extract.apiKey?.(request) ?? (await fitted(apiKeyHeader ? v.header(apiKeyHeader.toLowerCase()) : bearerToken(authorization), MAX.identifier)),
      // Cut, not digested: a deny list's user-agent patterns ("*badbot*") read its text (its first
      // 1,024 characters, all Floodgate takes: a name padded past them is not seen).
      userAgent: extract.userAgent?.(request) ?? clean(v.header("user-agent"), MAX.userAgent),
      cookie: extract.cookie?.(request) ?? (cookieName ? await fitted(cookieValue(v.header("cookie"), cookieName), MAX.cookie) : undefined),
      method: extract.method?.(request) ?? knownMethod(v.method),
      resource: extract.resource?.(request) ?? clean(path, MAX.resource),
      cost: extract.cost?.(request),
      ignorePathCase,
    };
  };

  return {
    client,
    async decide(request) {
      if (skipped(request)) return SKIP;
      const decision = await client.check(await checkOf(request));
      if (decision.allowed) return { kind: "pass", decision, headers: decision.headers, delayMs: decision.delayMs ?? 0 };
      if (decision.reason?.code === "DENY_LISTED") return { kind: "deny", decision, status: 403, ...accessDenied(decision, problemType) };
      return { kind: "deny", decision, status: 429, ...problem(decision, problemType) };
    },
    release: (decision) => (decision.lease ? client.releaseLease(decision.lease.id).then(ignore, ignore) : Promise.resolve()),
    close: () => (owned ? client.close() : Promise.resolve()),
  };
}

function ignore(): void {}

/** What releaseWhenDone reads of a node:http response. */
export interface NodeResponse {
  /** Its connection has closed (the caller left) or it has been sent and closed. */
  readonly closed: boolean;
  readonly writableFinished: boolean;
  once(event: "finish" | "close", listener: () => void): unknown;
}

/**
 * Releases the verdict's lease once the response has been sent or its
 * connection closed, whichever comes first (once); at once when that
 * happened while the check was pending (a caller that gave up), whose
 * events have been and gone.
 */
export function releaseWhenDone(gate: Gate<unknown>, verdict: Verdict, response: NodeResponse): void {
  if (verdict.kind !== "pass" || !verdict.decision.lease) return;
  if (response.closed || response.writableFinished) {
    void gate.release(verdict.decision);
    return;
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    void gate.release(verdict.decision);
  };
  response.once("finish", release);
  response.once("close", release);
}

/**
 * The 429's headers and body: the decision's headers (Retry-After among
 * them) and an RFC 9457 problem details object, with the deciding rule and
 * the wait as extension members, and the seed design's `error` object.
 */
function problem(decision: FloodgateDecision, type: string): { headers: HttpHeader[]; body: string } {
  const retryAfter = decision.retryAfter ?? 1;
  const message = `Rate limit exceeded. Try again in ${retryAfter} ${retryAfter === 1 ? "second" : "seconds"}.`;
  const body = {
    type,
    title: "Too Many Requests",
    status: 429,
    detail: message,
    ...(decision.rule === null ? {} : { rule: decision.rule.name }),
    retry_after: retryAfter,
    error: { code: "RATE_LIMIT_EXCEEDED", message, retry_after: retryAfter },
  };
  const headers = decision.headers.some((h) => h.name === "Retry-After") ? decision.headers : [...decision.headers, { name: "Retry-After", value: String(retryAfter) }];
  return { headers: [...headers, { name: "Content-Type", value: "application/problem+json" }], body: JSON.stringify(body) };
}

/**
 * The 403's headers and body for a deny-listed request: a problem details
 * object saying only that access is denied, and the decision's headers (a
 * Retry-After when the entry expires, nothing otherwise).
 */
function accessDenied(decision: FloodgateDecision, type: string): { headers: HttpHeader[]; body: string } {
  const message = "Access denied.";
  const body = { type, title: "Forbidden", status: 403, detail: message, error: { code: "ACCESS_DENIED", message } };
  return { headers: [...decision.headers, { name: "Content-Type", value: "application/problem+json" }], body: JSON.stringify(body) };
}

function clientOptions<Req>(options: MiddlewareOptions<Req>): FloodgateClientOptions {
  if (options.url === undefined || options.token === undefined) throw new TypeError("floodgate middleware: give options.client, or options.url and options.token to make one");
  const { url, token, timeoutMs, failureMode, batch, cache, connections, instances, fetch } = options;
  return { url, token, timeoutMs, failureMode, batch, cache, connections, instances, fetch };
}

function trustedHops(trust: boolean | number | undefined): number {
  if (trust === undefined || trust === false) return 0;
  if (trust === true) return Number.POSITIVE_INFINITY;
  if (!Number.isInteger(trust) || trust < 0) throw new TypeError(`floodgate middleware: options.trustProxy must be true, false or a number of proxies (got ${trust})`);
  return trust;
}

/**
 * A skip is a hole in every limit, so only the path as sent is compared,
 * never decoded (resourceOf): Express routes "/%68ealthz" to no health
 * check, and skipping it would let it past the rules to whatever serves it.
 */
function skipTest<Req>(skip: GateOptions<Req>["skip"], view: (request: Req) => RequestView): (request: Req) => boolean {
  if (skip === undefined) return () => false;
  if (typeof skip === "function") return skip;
  const paths = new Set(skip.filter((s): s is string => typeof s === "string"));
  const patterns = skip.filter((s): s is RegExp => s instanceof RegExp);
  return (request) => {
    const path = pathOf(view(request).url);
    return paths.has(path) || patterns.some((pattern) => pattern.test(path));
  };
}

/**
 * The caller's address: the socket's peer, or with trusted proxies the
 * address the farthest trusted one saw, read from the right of
 * X-Forwarded-For. A hop that is not an address stops the walk there. A peer
 * the runtime does not tell (fetch runtimes) does not stop it: the header's
 * last hop is what the nearest trusted proxy saw whoever that proxy is, and
 * stopping there left every IP rule without an address to count.
 */
function clientIp(view: RequestView, hops: number): string | undefined {
  let ip = ipLike(view.remoteAddress);
  if (hops === 0) return ip;
  const forwarded = (view.header("x-forwarded-for") ?? "").split(",").map((hop) => hop.trim()).filter((hop) => hop !== "").reverse();
  for (let i = 0; i < forwarded.length && i < hops; i++) {
    const hop = ipLike(forwarded[i]);
    if (hop === undefined) break;
    ip = hop;
  }
  return ip;
}

function ipLike(address: string | undefined): string | undefined {
  return address !== undefined && address.length <= MAX_IP && (IPV4.test(address) || IPV6.test(address)) ? address : undefined;
}

/** The method as Floodgate names it, or none for one it does not know: Floodgate refuses those, and Node's parser and the frameworks serve PURGE, PROPFIND, QUERY... */
function knownMethod(method: string): string | undefined {
  const upper = method.toUpperCase();
  return METHODS.has(upper) ? upper : undefined;
}

/**
 * The path as the app's router sees it, for the check: Fastify (find-my-way)
 * and Hono route on the path decoded as decodeURI decodes it, and Express hands
 * its route parameters decoded, so "/api/%6Frders" is served as /api/orders
 * and must count in its bucket (Floodgate leaves escapes alone). decodeURI
 * keeps the reserved characters escaped ("%2F" stays, inventing no segment,
 * "%3F" no query string); "%25" stays too, so that what is decoded is never
 * decoded again. Segment by segment: one whose escape is malformed stays as
 * sent, and so does one that would decode to a control character, which
 * clean() would strip (leaving "..", say).
 *
 * Dot segments: Floodgate folds "." and ".." away ("/api/../admin" is
 * /admin to it), while Express and Fastify route them as sent, below /api,
 * so a rule on "/api/**" would never count what its routes serve. A "." or
 * ".." segment, written so or escaped ("%2e%2e"), goes to Floodgate escaped,
 * which it leaves in place. Fetch runtimes give a URL whose dot segments
 * WHATWG URL has folded already, as their routers see it. Only the check's
 * resource: the skip list compares the path as sent (skipTest).
 */
function resourceOf(path: string): string {
  if (!MAY_CHANGE.test(path)) return path;
  return path.split("/").map(routedSegment).join("/");
}

/** A path resourceOf may change: one with an escape or a dot segment. */
const MAY_CHANGE = /%|\/\.\.?(?:\/|$)/;

function routedSegment(segment: string): string {
  if (segment === ".") return "%2E";
  if (segment === "..") return "%2E%2E";
  if (!segment.includes("%")) return segment;
  try {
    const decoded = decodeURI(segment.replace(/%25/g, "%2525"));
    return decoded === "." || decoded === ".." || decoded.replace(CONTROL, "") !== decoded ? segment : decoded;
  } catch {
    return segment;
  }
}

/**
 * The scheme and authority of an absolute-form request target ("GET
 * http://host/path HTTP/1.1", which a server must accept), taken off as
 * text: WHATWG URL would fold the path's dot segments, which Express and
 * Fastify route as sent.
 */
const SCHEME_AND_AUTHORITY = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

function pathOf(url: string): string {
  const path = withoutQueryOrFragment(url.replace(SCHEME_AND_AUTHORITY, ""));
  return path.startsWith("/") ? path : "/";
}

function bearerToken(authorization: string | undefined): string | undefined {
  const match = authorization === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(";")) {
    const at = pair.indexOf("=");
    if (at !== -1 && pair.slice(0, at).trim() === name) return pair.slice(at + 1).trim();
  }
  return undefined;
}

function clean(value: string | undefined, max = Number.POSITIVE_INFINITY): string | undefined {
  if (value === undefined) return undefined;
  const cleaned = value.replace(CONTROL, "").slice(0, max).toWellFormed();
  return cleaned === "" ? undefined : cleaned;
}

/**
 * A value that only tells callers apart (a token, a cookie), made to fit
 * Floodgate's length for its field: one too long is stood for by the SHA-256
 * of the whole of it. Cut instead, every value with the same first
 * characters would share a bucket, as the JSON web tokens of one issuer and
 * audience do for their first few hundred. Floodgate keeps an API key as its
 * digest anyway (service-limits.ts).
 */
async function fitted(value: string | undefined, max: number): Promise<string | undefined> {
  const cleaned = clean(value);
  if (cleaned === undefined || cleaned.length <= max) return cleaned;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(cleaned)));
  return `sha256:${Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}
