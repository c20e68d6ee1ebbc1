/**
 * An async iterator over pushed events with a bounded buffer. A subscriber
 * that reads slower than events arrive is not allowed to make the server's
 * memory grow: once `capacity` events wait for it, the stream drops them,
 * stops listening, and ends with the error `overflow` makes, so that the
 * subscriber knows it missed events (and can subscribe again) rather than
 * silently seeing fewer.
 */

import type { Unsubscribe } from "../domain/ports.js";

export interface EventStreamOptions {
  /** Events held for a slow reader; one more ends the stream. */
  capacity: number;
  /** The error a stream ends with when its reader fell `capacity` events behind. */
  overflow: () => Error;
  /** Called once, when the stream ends for any reason. */
  onClose?: () => void;
}

export function eventStream<T>(subscribe: (push: (event: T) => void) => Unsubscribe, options: EventStreamOptions): AsyncIterableIterator<T> {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let done = false;
  let failure: Error | null = null;
  const unsubscribe = subscribe((event) => {
    if (done) return;
    if (waiting) {
      const resolve = waiting;
      waiting = null;
      resolve({ value: event, done: false });
      return;
    }
    if (buffer.length >= options.capacity) {
      failure = options.overflow();
      finish();
      return;
    }
    buffer.push(event);
  });
  function finish(): IteratorResult<T> {
    if (!done) {
      done = true;
      unsubscribe();
      options.onClose?.();
      buffer.length = 0;
      waiting?.({ value: undefined, done: true });
      waiting = null;
    }
    return { value: undefined, done: true };
  }
  return {
    next: () => {
      if (buffer.length > 0) return Promise.resolve({ value: buffer.shift()!, done: false });
      if (failure !== null) {
        const error = failure;
        failure = null;
        return Promise.reject(error);
      }
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    return: () => Promise.resolve(finish()),
    throw: (error?: unknown) => {
      finish();
      return Promise.reject(error);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
