/** The checks' fast path: FAST_PATH_CACHE_SIZE and FAST_PATH_CACHE_BYTES, each bad value stopped with its exact message. */

import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../../src/config/settings.js";

describe("fast-path settings", () => {
  it("keep up to 1000 documents in up to 64 MiB by default", () => {
    const { fastPathCacheSize, fastPathCacheBytes } = loadSettings({});
    expect({ fastPathCacheSize, fastPathCacheBytes }).toEqual({ fastPathCacheSize: 1000, fastPathCacheBytes: 64 * 1024 * 1024 });
  });

  it("take FAST_PATH_CACHE_BYTES in bytes", () => {
    expect(loadSettings({ FAST_PATH_CACHE_BYTES: "268435456" }).fastPathCacheBytes).toBe(256 * 1024 * 1024);
  });

  it.each(["0", "1048575", "64MB", "2097152.5", "-1", "1099511627777"])("refuse FAST_PATH_CACHE_BYTES=%s, naming the variable", (value) => {
    expect(() => loadSettings({ FAST_PATH_CACHE_BYTES: value })).toThrow(
      new SettingsError(`FAST_PATH_CACHE_BYTES must be an integer from 1048576 to 1099511627776 (got ${JSON.stringify(value)})`),
    );
  });
});
