/**
 * The Lua of lua/ as one Redis function library (Redis 7's FUNCTION LOAD and
 * FCALL): lua/decide.lua, lua/reset.lua and lua/merge.lua, assembled behind
 * the codes they share with TypeScript (script-codes.ts). A library's helpers are defined
 * once, when it is loaded, where a script sent by EVALSHA defined them again
 * on every call (about a fifth of a check's Redis time).
 *
 * The library and its functions are named after a digest of its text, so
 * that during a deploy instances running different versions each call their
 * own, side by side in one Redis. A Redis that lacks the library (restarted
 * without persistence, flushed with FUNCTION FLUSH, a new cluster master)
 * answers "Function not found": the library is loaded there and the call
 * sent again, so a check never fails because Redis forgot it. Libraries of
 * older versions stay loaded until someone deletes them (docs/operations.md).
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Command, type ChainableCommander, type Cluster, type Redis } from "ioredis";
import { leaseOf, type CounterCall } from "../../domain/ports.js";
import type { KeyLayout } from "./key-layout.js";
import { ACTION_CODES, ALGORITHM_CODES, luaPrelude, type Mode } from "./script-codes.js";
import type { LimitParams } from "../../domain/algorithms/index.js";
import { calendarBoundaries, calendarMarker } from "../../domain/calendar.js";

/** lua/ sits at the package root: three levels above both src/store/redis and dist/store/redis. */
const LUA_DIR = new URL("../../../lua/", import.meta.url);

function readScript(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), "utf8");
}

export interface FloodgateLibrary {
  /** What FUNCTION LOAD is sent. */
  readonly text: string;
  readonly name: string;
  /** The functions' names, for FCALL. */
  readonly decide: string;
  /** Several decisions in one call (decide.lua's decide_each). */
  readonly decideEach: string;
  readonly reset: string;
  readonly state: string;
  readonly merge: string;
}

/** The texts of lua/decide.lua, lua/reset.lua and lua/merge.lua (another version's, for lua:bench). */
export interface LibrarySources {
  decide: string;
  reset: string;
  merge: string;
}

/**
 * The library as Redis loads it: its name line, then the prelude on the line
 * of decide.lua's first (so that line n of decide.lua is line n + 1 of the
 * library), reset.lua, merge.lua, and the lines registering the functions. The same
 * text every time for the same sources.
 */
export function floodgateLibrary(sources: LibrarySources = { decide: readScript("decide"), reset: readScript("reset"), merge: readScript("merge") }): FloodgateLibrary {
  const body = `${luaPrelude()}${sources.decide}\n${sources.reset}\n${sources.merge}`;
  const version = createHash("sha1").update(body).digest("hex").slice(0, 16);
  const name = `floodgate_${version}`;
  const [decide, decideEach, reset, state, merge] = ["decide", "decide_each", "reset", "state", "merge"].map((fn) => `floodgate_${fn}_${version}`) as [string, string, string, string, string];
  const registrations = Object.entries({ decide, decide_each: decideEach, reset, state, merge }).map(([fn, registered]) => `redis.register_function('${registered}', ${fn})\n`);
  return { text: `#!lua name=${name}\n${body}\n${registrations.join("")}`, name, decide, decideEach, reset, state, merge };
}

/** decide.lua's arguments: the number of keys, the keys, then its args. */
export type ScriptArgs = [numberOfKeys: number, ...keysAndArgs: (string | number)[]];

/**
 * A rule's spec in decide.lua's args, "<algorithm>:<limit>:<window_ms>:<capacity>:<action>"
 * in codes, then ":C:<marker>:<six boundaries>" for a calendar (the periods
 * around `nowMs`, the instance's now: see "Calendars" in decide.lua), then
 * ":G:<regions>" for a bucket shared with other regions; the script parses
 * each spec once, so the same rule must always give the same text (a
 * calendar's, the same text for as long as the instance's now stays in one
 * period). Kept per params object: a compiled rule's params are one object
 * for as long as the rule version lives.
 */
const specs = new WeakMap<LimitParams, string>();
const calendarSpecs = new WeakMap<LimitParams, { boundaries: readonly number[]; spec: string }>();

/** `nowMs` null: this instance's clock, read only for a calendar (Date.now() is a call into V8's C++, and most rules have none). */
export function specOf(params: LimitParams, nowMs: number | null): string {
  const { calendar } = params;
  if (calendar === undefined) {
    let spec = specs.get(params);
    if (spec === undefined) specs.set(params, (spec = specText(params, "")));
    return spec;
  }
  const boundaries = calendarBoundaries(nowMs ?? Date.now(), calendar);
  const known = calendarSpecs.get(params);
  if (known?.boundaries === boundaries) return known.spec;
  const spec = specText(params, `:C:${calendarMarker(calendar)}:${boundaries.join(",")}`);
  calendarSpecs.set(params, { boundaries, spec });
  return spec;
}

function specText(params: LimitParams, calendarPart: string): string {
  const regions = params.sharedWith === undefined ? "" : `:G:${params.sharedWith.join(",")}`;
  return `${ALGORITHM_CODES[params.algorithm]}:${params.limit}:${params.windowMs}:${params.capacity}:${ACTION_CODES[params.action]}${calendarPart}${regions}`;
}

/**
 * decide.lua's arguments for some of a call's buckets (by their index in the
 * call): the keys, then the head ("<cost>:<mode>", and ":<now>" when
 * `nowMs` pins the clock; null lets the script read Redis TIME), then each
 * bucket's spec and field. A release appends the receipts after these. A
 * CONCURRENCY bucket's second value is the call's lease, the name of the
 * slot it takes, where the others give their field.
 */
export function decideArgs(layout: KeyLayout, call: CounterCall, buckets: readonly number[], mode: Mode, nowMs: number | null): ScriptArgs {
  const keys: string[] = [];
  const args: (string | number)[] = [nowMs === null ? `${call.cost}:${mode}` : `${call.cost}:${mode}:${nowMs}`];
  for (const i of buckets) {
    const bucket = call.buckets[i]!;
    const field = layout.field(bucket.key);
    for (const key of layout.scriptKeys(bucket, field)) keys.push(key);
    args.push(specOf(bucket.params, nowMs), bucket.params.algorithm === "CONCURRENCY" ? leaseOf(call) : field);
  }
  const all: ScriptArgs = [keys.length];
  for (const key of keys) all.push(key);
  for (const arg of args) all.push(arg);
  return all;
}

/**
 * What decide.lua replies: a decision's numbers packed into one string (see
 * decisionNumbers), or the array of a reservation (integers, then receipts)
 * or of a release (integers). ioredis hands strings over as Buffers, since
 * the packed numbers are no text.
 */
export type ScriptReply = Buffer | (number | Buffer)[];

/** A decision's reply as numbers: now, allowed, then remaining, reset and outcome per rule (decide.lua's "Reply"). */
export function decisionNumbers(reply: Buffer): number[] {
  const numbers: number[] = [];
  for (let at = 0; at + 8 <= reply.length; at += 8) numbers.push(reply.readDoubleLE(at));
  return numbers;
}

/** ioredis gives every command a twin answering Buffers, which its typings leave out for FCALL. */
interface BufferFcall {
  fcallBuffer(name: string, numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
}

export interface FloodgateCommands {
  floodgateDecide(...args: ScriptArgs): Promise<ScriptReply>;
  /** Decisions and dry runs of one Redis in one FCALL (decide.lua's decide_each): each command's reply, or its error, in order. */
  floodgateDecideEach(commands: readonly ScriptArgs[]): Promise<(Buffer | Error)[]>;
  floodgateReset(pageA: string, pageB: string, log: string, leases: string, field: string): Promise<number>;
  /** A bucket's own state as text ("" when it has none), and another region's state of it kept as a copy (merge.lua); `now` "" reads Redis TIME. */
  floodgateState(pageA: string, pageB: string, now: number | "", spec: string, field: string): Promise<string>;
  floodgateMerge(pageA: string, pageB: string, now: number | "", spec: string, field: string, region: string, state: string): Promise<number>;
  /** The library on this client, for FCALL in a pipeline (`decideInPipeline`). */
  readonly floodgateLibrary: FloodgateLibrary;
}

export type ScriptedRedis = (Redis | Cluster) & FloodgateCommands;

/**
 * Gives the client floodgateDecide and floodgateReset, as ioredis's
 * defineCommand gives a client a script's command: each an FCALL of the
 * library's function, which loads the library where Redis lacks it and sends
 * the call again.
 */
export function registerScripts(client: Redis | Cluster, library: FloodgateLibrary = floodgateLibrary()): ScriptedRedis {
  const scripted = client as ScriptedRedis;
  if ("floodgateLibrary" in scripted && scripted.floodgateLibrary.name === library.name) return scripted;
  const loader = new LibraryLoader(client, library);
  const withLibrary = <T>(send: () => Promise<T>): Promise<T> => send().catch((error: unknown) => (isMissingFunction(error) ? loader.load().then(send) : Promise.reject(error)));
  Object.assign(client, {
    floodgateLibrary: library,
    floodgateDecide: (...args: ScriptArgs) => withLibrary(() => (client as unknown as BufferFcall).fcallBuffer(library.decide, ...args) as Promise<ScriptReply>),
    floodgateDecideEach: (commands: readonly ScriptArgs[]) =>
      withLibrary(() => client.sendCommand(new TextCommand("fcall", [library.decideEach, ...decideEachArgs(commands)])) as Promise<(Buffer | Error)[]>),
    floodgateReset: (pageA: string, pageB: string, log: string, leases: string, field: string) =>
      withLibrary(() => client.fcall(library.reset, 4, pageA, pageB, log, leases, field) as Promise<number>),
    floodgateState: (pageA: string, pageB: string, now: number | "", spec: string, field: string) =>
      withLibrary(() => client.fcall(library.state, 2, pageA, pageB, now, spec, field) as Promise<string>),
    floodgateMerge: (pageA: string, pageB: string, now: number | "", spec: string, field: string, region: string, state: string) =>
      withLibrary(() => client.fcall(library.merge, 2, pageA, pageB, now, spec, field, region, state) as Promise<number>),
  });
  return scripted;
}

/**
 * A command whose arguments are already text, in one flat array, answered
 * in Buffers. ioredis's Command copies the arguments it is given with
 * Array.prototype.flat, which Node 20 runs at about 70 ns an argument: a
 * decide_each of 64 checks (960 arguments) paid 70 µs for it. This one
 * starts from none and is handed its own, which ioredis would have turned
 * into text anyway.
 */
class TextCommand extends Command {
  constructor(name: string, args: string[]) {
    super(name, [], { replyEncoding: null });
    this.args = args;
  }
}

/** decide_each's arguments for these commands, as text: all their keys, then for each its number of keys, its number of args and its args. */
export function decideEachArgs(commands: readonly ScriptArgs[]): string[] {
  const all = [""];
  for (const command of commands) for (let i = 1; i <= command[0]; i++) all.push(String(command[i]));
  all[0] = String(all.length - 1);
  for (const command of commands) {
    const keyCount = command[0];
    all.push(String(keyCount), String(command.length - 1 - keyCount));
    for (let i = keyCount + 1; i < command.length; i++) all.push(String(command[i]));
  }
  return all;
}

/**
 * One FCALL of decide.lua queued on a pipeline of one Redis; its answer, or
 * when Redis lacked the library, the answer of the call sent again by itself
 * once the library is loaded.
 */
export function decideInPipeline(client: ScriptedRedis, pipeline: ChainableCommander, args: ScriptArgs): (result: [Error | null, unknown]) => Promise<ScriptReply> {
  void (pipeline as unknown as BufferFcall).fcallBuffer(client.floodgateLibrary.decide, ...args);
  return ([error, reply]) => {
    if (error === null) return Promise.resolve(reply as ScriptReply);
    return isMissingFunction(error) ? client.floodgateDecide(...args) : Promise.reject(error);
  };
}

function isMissingFunction(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("ERR Function not found");
}

/** FUNCTION LOAD on the client's Redis, or on every master of its cluster; concurrent misses share one load. */
class LibraryLoader {
  private loading: Promise<void> | null = null;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly library: FloodgateLibrary,
  ) {}

  load(): Promise<void> {
    this.loading ??= this.loadEverywhere().finally(() => (this.loading = null));
    return this.loading;
  }

  private async loadEverywhere(): Promise<void> {
    const nodes = this.client.isCluster ? (this.client as Cluster).nodes("master") : [this.client as Redis];
    await Promise.all(nodes.map((node) => loadLibrary(node, this.library)));
  }
}

/** Loads the library on one Redis; one already there (loaded by another instance) is as good. */
export async function loadLibrary(redis: Redis, library: FloodgateLibrary): Promise<void> {
  try {
    await redis.call("FUNCTION", "LOAD", library.text);
  } catch (error) {
    if (!(error instanceof Error && /already exists/.test(error.message))) throw error;
  }
}
