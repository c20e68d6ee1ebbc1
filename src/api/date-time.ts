/**
 * The contract's DateTime scalar: graphql-scalars' DateTimeResolver (its
 * name, description, parsing and checks), serialised to the ISO text itself
 * instead of a Date.
 *
 * Both answer the same bytes, since JSON.stringify writes a Date as its
 * toJSON(), which is its toISOString(). But a Date left in a result sends
 * JSON.stringify out of its fast path into the Date's toJSON for every
 * timestamp: a decision has two and each of its rules' results one more,
 * and stringifying a client's batch of 16 decisions took 2.5 times as long
 * with the Dates in it as without (150 µs against 60, measured in the
 * server under the client's load). Serialised here, the timestamps of one
 * answer are formatted mostly once: a batch's decisions share their instant
 * and their rules' window ends.
 */

import { GraphQLScalarType } from "graphql";
import { DateTimeResolver } from "graphql-scalars";

/** How many distinct instants the formatting remembers, by their last bits: a power of two. */
const REMEMBERED = 256;
const remembered = { instants: new Array<number>(REMEMBERED).fill(NaN), texts: new Array<string>(REMEMBERED).fill("") };

/** date.toISOString(), from memory when the instant was formatted lately. */
export function isoText(date: Date): string {
  const instant = date.getTime();
  const slot = instant & (REMEMBERED - 1);
  if (remembered.instants[slot] === instant) return remembered.texts[slot]!;
  const text = date.toISOString();
  remembered.instants[slot] = instant;
  remembered.texts[slot] = text;
  return text;
}

export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  ...DateTimeResolver.toConfig(),
  // DateTimeResolver refuses what is no valid instant and gives a Date for the rest.
  serialize: (value) => isoText(DateTimeResolver.serialize(value)),
});
