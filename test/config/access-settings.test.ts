/** The settings that bound what one API key may hold over WebSocket, each bad value stopped with its exact message. */

import { describe, expect, it } from "vitest";
import { loadSettings, SettingsError } from "../../src/config/settings.js";

describe("subscription and socket caps", () => {
  it("default to 50 subscriptions per socket and 20 sockets per key", () => {
    expect(loadSettings({})).toMatchObject({ maxSubscriptionsPerSocket: 50, maxSocketsPerKey: 20 });
  });

  it("take MAX_SUBSCRIPTIONS_PER_SOCKET and MAX_SOCKETS_PER_KEY", () => {
    expect(loadSettings({ MAX_SUBSCRIPTIONS_PER_SOCKET: "5", MAX_SOCKETS_PER_KEY: "200" })).toMatchObject({ maxSubscriptionsPerSocket: 5, maxSocketsPerKey: 200 });
  });

  it.each([
    [{ MAX_SUBSCRIPTIONS_PER_SOCKET: "0" }, 'MAX_SUBSCRIPTIONS_PER_SOCKET must be an integer from 1 to 100000 (got "0")'],
    [{ MAX_SUBSCRIPTIONS_PER_SOCKET: "many" }, 'MAX_SUBSCRIPTIONS_PER_SOCKET must be an integer from 1 to 100000 (got "many")'],
    [{ MAX_SOCKETS_PER_KEY: "-1" }, 'MAX_SOCKETS_PER_KEY must be an integer from 1 to 1000000 (got "-1")'],
    [{ MAX_SOCKETS_PER_KEY: "2.5" }, 'MAX_SOCKETS_PER_KEY must be an integer from 1 to 1000000 (got "2.5")'],
  ])("refuse %o", (env, message) => {
    expect(() => loadSettings(env)).toThrow(new SettingsError(message));
  });
});
