import { UnavailableError } from "../domain/errors.js";

/** Prisma's codes for a database it cannot reach or that stopped answering. */
const UNREACHABLE_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);
/** The pg driver's and the OS's words for the same. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND", "EPIPE", "57P01", "57P03"]);

/**
 * The UnavailableError for an error that means "the rule database cannot be
 * reached right now", or null for any other error (which stays what it is).
 */
export function unavailable(error: unknown): UnavailableError | null {
  if (error instanceof UnavailableError) return error;
  if (!isUnreachable(error)) return null;
  return new UnavailableError("the rule database is unreachable: rules cannot change until it is back (checks go on with the rules already loaded)", {
    cause: error,
  });
}

function isUnreachable(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { code, name, message } = error as { code?: unknown; name?: unknown; message?: unknown };
  if (typeof code === "string" && (UNREACHABLE_CODES.has(code) || NETWORK_CODES.has(code))) return true;
  if (name === "PrismaClientInitializationError") return true;
  if (typeof message === "string" && /Connection terminated|timeout exceeded when trying to connect/i.test(message)) return true;
  const cause = (error as { cause?: unknown }).cause;
  return cause !== undefined && cause !== error && isUnreachable(cause);
}
