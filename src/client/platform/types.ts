import type { LocalLimiter } from "../local-limiter.js";
import type { Transport, TransportOptions } from "../transport.js";

/** What differs between Node and fetch-based runtimes; chosen by package.json "imports" conditions, never by sniffing the runtime. */
export interface Platform {
  transport(options: TransportOptions): Transport;
  /** For the push channel; null where the runtime has none (the refusal cache then stays off). */
  WebSocket: (new (url: string, protocols?: string | string[]) => unknown) | null;
  /** The in-process limiter of failureMode LOCAL; null where the runtime cannot run it. */
  LocalLimiter: typeof LocalLimiter | null;
}
