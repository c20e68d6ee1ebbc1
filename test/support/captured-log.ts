/** A pino logger whose lines a test reads back, parsed, in the order they were written. */

import { Writable } from "node:stream";
import { pino, type Logger, type LoggerOptions } from "pino";

export type LogLine = Record<string, unknown>;

export function capturedLog(options: LoggerOptions = { level: "info" }): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { logger: pino(options, sink), lines };
}
