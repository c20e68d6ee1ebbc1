/**
 * Failures the domain names. A limit reached is never one of these: it is a
 * Decision. These are the caller's mistakes (bad input, unknown id, stale
 * version) and are mapped to GraphQL error codes at the edge.
 */

export class ValidationError extends Error {
  /** The offending argument, as the caller wrote it: "input.limit", "request.cost". */
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field} ${message}`);
    this.name = "ValidationError";
    this.field = field;
  }
}

export class NotFoundError extends Error {
  constructor(what: string, id: string) {
    super(`${what} ${JSON.stringify(id)} does not exist`);
    this.name = "NotFoundError";
  }
}

export class ConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConflictError";
  }
}

/** A dependency (database, counter store) cannot serve the call right now. */
export class UnavailableError extends Error {
  /** Seconds after which trying again makes sense, when the whole request failed for it (HTTP 503 with Retry-After). */
  readonly retryAfter: number | null;
  constructor(message: string, options?: { cause?: unknown; retryAfter?: number }) {
    super(message, options);
    this.name = "UnavailableError";
    this.retryAfter = options?.retryAfter ?? null;
  }
}

/** The caller did not say who it is, or said it wrongly. */
export class UnauthenticatedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnauthenticatedError";
  }
}

/** The caller is known and may not do this. */
export class ForbiddenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ForbiddenError";
  }
}

/** The caller has made too many requests of this kind (Floodgate limits its own admin API). */
export class RateLimitedError extends Error {
  constructor(
    message: string,
    readonly retryAfter: number,
  ) {
    super(message);
    this.name = "RateLimitedError";
  }
}
