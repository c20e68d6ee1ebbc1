import { pino, type Logger } from "pino";

export type { Logger };

/** JSON logs on stdout; credentials in URLs and authorization headers never reach them. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: "floodgate" },
    redact: { paths: ["req.headers.authorization", "*.authorization", "secret", "*.secret"], censor: "[redacted]" },
  });
}
