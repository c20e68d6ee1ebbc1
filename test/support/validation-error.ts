/** Catching the ValidationError a validator throws, for the tests of what it says. */

import { ValidationError } from "../../src/domain/errors.js";

/**
 * The ValidationError that `run` throws. Any other error is rethrown, and a run
 * that throws nothing fails the test, naming the `input` that should have been rejected.
 */
export function validationErrorOf(run: () => unknown, input?: unknown): ValidationError {
  try {
    run();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error(input === undefined ? "expected a ValidationError" : `expected ${JSON.stringify(input)} to be rejected`);
}
