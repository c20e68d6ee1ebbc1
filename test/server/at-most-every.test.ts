/** atMostEvery: a fault met at every request shows in the log once an interval, and what it left out is told even when the fault stops. */

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { atMostEvery } from "../../src/server/logger.js";

describe("atMostEvery", () => {
  let lines: [string, number][];
  let log: (value: string) => void;

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    lines = [];
    log = atMostEvery<string>(1_000, (value, leftOut) => lines.push([value, leftOut]));
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it("writes the first value at once, and nothing more while nothing else comes", () => {
    log("a");
    expect(lines).toEqual([["a", 0]]);
    vi.advanceTimersByTime(5_000);
    expect(lines).toEqual([["a", 0]]);
  });

  it("leaves out what comes within the interval, and tells it when the interval ends: the latest value, and how many others", () => {
    log("a");
    vi.advanceTimersByTime(100);
    log("b");
    log("c");
    log("d");
    expect(lines).toEqual([["a", 0]]);
    vi.advanceTimersByTime(899);
    expect(lines).toEqual([["a", 0]]);
    vi.advanceTimersByTime(1);
    expect(lines).toEqual([
      ["a", 0],
      ["d", 2],
    ]);
  });

  it("starts a new interval with the line that told what was left out", () => {
    log("a");
    log("b");
    vi.advanceTimersByTime(1_000);
    expect(lines).toEqual([
      ["a", 0],
      ["b", 0],
    ]);
    vi.advanceTimersByTime(500);
    log("c");
    vi.advanceTimersByTime(499);
    expect(lines).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(lines).toEqual([
      ["a", 0],
      ["b", 0],
      ["c", 0],
    ]);
  });

  it("writes a value that comes after the interval at once", () => {
    log("a");
    vi.advanceTimersByTime(1_000);
    log("b");
    expect(lines).toEqual([
      ["a", 0],
      ["b", 0],
    ]);
  });

  it("never writes two lines within one interval when its timer runs late, after a value that came at the interval's end", () => {
    log("a");
    // Set before the one log("b") sets, for the same instant: it runs first, as a value would under a busy event loop.
    setTimeout(() => {
      log("c");
      log("d");
    }, 1_000);
    log("b");
    vi.advanceTimersByTime(1_000);
    expect(lines).toEqual([
      ["a", 0],
      ["c", 1],
    ]);
    vi.advanceTimersByTime(999);
    expect(lines).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(lines).toEqual([
      ["a", 0],
      ["c", 1],
      ["d", 0],
    ]);
  });
});
