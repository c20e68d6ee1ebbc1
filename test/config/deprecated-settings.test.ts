/** A start with a setting under its former name logs one warning that names the new name, and runs as the new name would. */

import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../../src/app.js";
import { loadSettings } from "../../src/config/settings.js";
import { testAdminToken } from "../harness/in-process-app.js";
import { capturedLog } from "../support/captured-log.js";

describe("a start with RULE_RELOAD_SECONDS and RULES_RETRY_MS", () => {
  const { logger, lines } = capturedLog();
  let app: App;

  beforeAll(async () => {
    const env = { PORT: "0", HOST: "127.0.0.1", DATA_DIR: "memory://", ADMIN_TOKEN: testAdminToken(), RULE_RELOAD_SECONDS: "60", RULES_RETRY_MS: "500" };
    app = await startApp(loadSettings(env), { logger });
  });
  afterAll(() => app?.close());

  it("logs one warning for each, naming what to set instead", () => {
    const warnings = lines.filter((line) => line.level === pino.levels.values.warn!).map((line) => line.msg);
    expect(warnings).toEqual(["RULES_RETRY_MS is deprecated: set RULE_RETRY_MS=500 instead", "RULE_RELOAD_SECONDS is deprecated: set RULE_RELOAD_MS=60000 instead"]);
  });
});
