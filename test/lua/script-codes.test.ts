/**
 * The codes TypeScript and decide.lua share have one home,
 * src/store/redis/script-codes.ts: the script defines none of its own and
 * receives them as a prelude when its library is assembled.
 */

import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WEIGHT_ONE } from "../../src/domain/algorithms/sliding-window-counter.js";
import { ACTIONS, ALGORITHMS } from "../../src/domain/rule.js";
import { ACTION_CODES, ALGORITHM_CODES, luaPrelude, MODE, RELEASE_OUTCOMES } from "../../src/store/redis/script-codes.js";
import { floodgateLibrary } from "../../src/store/redis/scripts.js";
import { testRedis } from "../support/redis.js";
import { redisAvailable } from "../support/services.js";

const DECIDE_LUA = readFileSync(new URL("../../lua/decide.lua", import.meta.url), "utf8");

/** Every constant the prelude must give decide.lua, by its Lua name, with its TypeScript value. */
const EXPECTED: [string, number][] = [
  ...ALGORITHMS.map((a): [string, number] => [`ALGO_${a}`, ALGORITHM_CODES[a]]),
  ...ACTIONS.map((a): [string, number] => [`ACTION_${a}`, ACTION_CODES[a]]),
  ["MODE_DECIDE", MODE.DECIDE],
  ["MODE_DRY_RUN", MODE.DRY_RUN],
  ["MODE_RESERVE", MODE.RESERVE],
  ["MODE_RELEASE", MODE.RELEASE],
  ["RELEASE_NOTHING_LEFT", RELEASE_OUTCOMES.NOTHING_LEFT],
  ["RELEASE_SUBTRACTED", RELEASE_OUTCOMES.SUBTRACTED],
  ["RELEASE_RESTORED", RELEASE_OUTCOMES.RESTORED],
  ["WEIGHT_ONE", WEIGHT_ONE],
];

const RESET_LUA = readFileSync(new URL("../../lua/reset.lua", import.meta.url), "utf8");
const MERGE_LUA = readFileSync(new URL("../../lua/merge.lua", import.meta.url), "utf8");

/** The library's text as FUNCTION LOAD is sent it. */
function registeredDecide(): string {
  return floodgateLibrary().text;
}

/** decide.lua's code: its comments and string literals removed. */
function codeOf(lua: string): string {
  return lua
    .replace(/--\[\[[\s\S]*?\]\]/g, "")
    .replace(/--[^\n]*/g, "")
    .replace(/'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"/g, "''");
}

describe("decide.lua's codes", () => {
  it("loads decide.lua behind a prelude holding every shared code at its TypeScript value, then reset.lua, merge.lua and the registrations", () => {
    const registered = registeredDecide();
    const { name, decide, decideEach, reset, state, merge } = floodgateLibrary();
    expect(registered).toBe(
      `#!lua name=${name}\n${luaPrelude()}${DECIDE_LUA}\n${RESET_LUA}\n${MERGE_LUA}\n` +
        `redis.register_function('${decide}', decide)\nredis.register_function('${decideEach}', decide_each)\nredis.register_function('${reset}', reset)\n` +
        `redis.register_function('${state}', state)\nredis.register_function('${merge}', merge)\n`,
    );
    for (const [name, value] of EXPECTED) expect(registered).toContain(`local ${name} = ${value} `);
  });

  it("assembles the same text every time, named after its digest, so that instances of one version share one library", () => {
    expect(registeredDecide()).toBe(registeredDecide());
    expect(floodgateLibrary().name).toMatch(/^floodgate_[0-9a-f]{16}$/);
    expect(floodgateLibrary({ decide: DECIDE_LUA + "\n", reset: RESET_LUA, merge: MERGE_LUA }).name).not.toBe(floodgateLibrary().name);
  });

  it("carries a code changed in TypeScript into the script", () => {
    const original = ALGORITHM_CODES.LEAKY_BUCKET;
    ALGORITHM_CODES.LEAKY_BUCKET = 99;
    try {
      expect(registeredDecide()).toContain("local ALGO_LEAKY_BUCKET = 99 ");
    } finally {
      ALGORITHM_CODES.LEAKY_BUCKET = original;
    }
  });

  it("keeps decide.lua's line numbers one ahead: the prelude shares the header's first line, after the library's name", () => {
    const lines = registeredDecide().split("\n");
    const decideLines = DECIDE_LUA.split("\n");
    expect(lines[1]).toBe(luaPrelude() + decideLines[0]);
    expect(lines.slice(2, decideLines.length + 1)).toEqual(decideLines.slice(1));
  });

  it("decide.lua defines no constant of its own, and takes every one it uses from the prelude", () => {
    const code = codeOf(DECIDE_LUA);
    expect(code.match(/\blocal\s+[A-Z][A-Z0-9_]*\b[^\n]*/g)).toBeNull();
    const used = new Set(code.match(/\b[A-Z][A-Z0-9_]+\b/g));
    const provided = new Set(EXPECTED.map(([name]) => name));
    expect([...used].filter((name) => !provided.has(name))).toEqual([]);
  });

  it("decide.lua compares algorithms, actions and modes with named codes only, never with a number", () => {
    expect(codeOf(DECIDE_LUA).match(/\b(algorithm|action|mode)\b\s*[~=]=\s*'*\d|band\(mode,\s*\d/g)).toBeNull();
  });
});

describe.runIf(await redisAvailable())("decide.lua's prelude on Redis", () => {
  let redis: Redis;
  let cleanup: () => Promise<void>;
  beforeAll(() => {
    ({ redis, cleanup } = testRedis());
  });
  afterAll(() => cleanup());

  it("gives the script every code at its TypeScript value", async () => {
    const values = await redis.eval(`${luaPrelude()}\nreturn { ${EXPECTED.map(([name]) => `tostring(${name})`).join(", ")} }`, 0);
    expect(values).toEqual(EXPECTED.map(([, value]) => String(value)));
  });
});
