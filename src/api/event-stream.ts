/**
 * An async iterator over pushed events with a bounded buffer: a subscriber
 * that reads slower than events arrive loses the oldest ones (and the count
 * of what it lost is kept), so no subscriber can make the server's memory
 * grow without bound.
 */

import type { Unsubscribe } from "../domain/ports.js";

export interface EventStreamOptions {
  /** Events held for a slow reader before the oldest are dropped. */
  capacity: number;
  onDrop?: (dropped: number) => void;
  /** Called once, when the subscriber goes away. */
  onClose?: () => void;
}

export function eventStream<T>(
  subscribe: (push: (event: T) => void) => Unsubscribe,
  options: EventStreamOptions,
): AsyncIterableIterator<T> {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let done = false;
  const unsubscribe = subscribe((event) => {
    if (done) return;
    if (waiting) {
      const resolve = waiting;
      waiting = null;
      resolve({ value: event, done: false });
      return;
    }
    buffer.push(event);
    if (buffer.length > options.capacity) {
      buffer.shift();
      options.onDrop?.(1);
    }
  });
  const finish = (): IteratorResult<T> => {
    if (!done) {
      done = true;
      unsubscribe();
      options.onClose?.();
      buffer.length = 0;
      waiting?.({ value: undefined, done: true });
      waiting = null;
    }
    return { value: undefined, done: true };
  };
  return {
    next: () => {
      if (buffer.length > 0) return Promise.resolve({ value: buffer.shift()!, done: false });
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
