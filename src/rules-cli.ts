/** `npm run rules -- import|validate|export FILE`: see src/cli/rules-command.ts. */

import "reflect-metadata";
import { pino } from "pino";
import { runRulesCommand } from "./cli/rules-command.js";
import { SettingsError } from "./config/settings.js";

// Logs go to standard error: standard output carries the report or the exported file.
const logger = pino({ level: process.env.LOG_LEVEL || "warn" }, pino.destination(2));

runRulesCommand(process.argv.slice(2), process.env, {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  logger,
}).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof SettingsError ? `rules: ${error.message}` : error);
    process.exitCode = 1;
  },
);
