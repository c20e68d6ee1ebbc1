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
 * the log without flooding it. What it leaves out is told when its interval
 * ends, by a line of the latest value left out, so a burst that stops is in
 * the log too, not only when the fault comes back. The timer keeps no process
 * alive.
 */
export function atMostEvery<T>(everyMs: number, log: (value: T, leftOut: number) => void): (value: T) => void {
  let lastMs = Number.NEGATIVE_INFINITY;
  let leftOut = 0;
  let latest: T;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const write = (value: T, others: number) => {
    log(value, others);
    lastMs = performance.now();
    leftOut = 0;
  };
  const endOfInterval = () => {
    timer = null;
    if (leftOut === 0) return;
    // A line came since this timer was set (it was late under load): the interval to wait for is that line's.
    const waitMs = lastMs + everyMs - performance.now();
    if (waitMs > 0) return waitFor(waitMs);
    write(latest, leftOut - 1);
  };
  const waitFor = (ms: number) => {
    timer = setTimeout(endOfInterval, ms);
    timer.unref?.();
  };
  return (value) => {
    // The interval has ended, its timer late under load: this line tells what it left out.
    if (performance.now() - lastMs >= everyMs) return write(value, leftOut);
    leftOut++;
    latest = value;
    if (timer === null) waitFor(lastMs + everyMs - performance.now());
  };
}
