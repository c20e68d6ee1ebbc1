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

/**
 * `log` at most once per `everyMs`, told how many it left out since its last
 * line: for a fault a busy path can meet at every request, which must show in
 * the log without flooding it.
 */
export function atMostEvery<T>(everyMs: number, log: (value: T, leftOut: number) => void): (value: T) => void {
  let lastMs = Number.NEGATIVE_INFINITY;
  let leftOut = 0;
  return (value) => {
    const nowMs = performance.now();
    if (nowMs - lastMs < everyMs) {
      leftOut++;
      return;
    }
    log(value, leftOut);
    lastMs = nowMs;
    leftOut = 0;
  };
}
