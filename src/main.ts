/** `npm start`: read the settings, start, and stop cleanly on SIGTERM / SIGINT. */

import "reflect-metadata";
import { startApp } from "./app.js";
import { loadSettings, SettingsError } from "./config/settings.js";
import { UnavailableError } from "./domain/errors.js";

async function main(): Promise<void> {
  const settings = loadSettings();
  const app = await startApp(settings);
  app.logger.info(
    { url: app.url, grpc: app.grpcAddress, metrics: app.metricsUrl, rules: app.storage.rules, counters: app.storage.counters },
    `Floodgate is serving ${app.url} (rules: ${app.storage.rules}; counters: ${app.storage.counters})` +
      (app.grpcAddress === null ? "" : `; Envoy's rate limit service over gRPC on ${app.grpcAddress}`) +
      (app.metricsUrl === null ? "" : `; metrics without a token on ${app.metricsUrl}`),
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    app.logger.info({ signal }, "shutting down");
    app.close().then(
      () => {
        app.logger.info("stopped");
        process.exit(0);
      },
      (error: unknown) => {
        app.logger.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((error: unknown) => {
  // Known reasons not to start are told in one line; anything else with its stack.
  console.error(error instanceof SettingsError || error instanceof UnavailableError ? `floodgate: ${error.message}` : error);
  process.exit(1);
});
