/**
 * A decision's headers as one text, each header a "Name: value" line, the
 * lines joined by "\n": LimitDecision.headerLines, which the client selects
 * in place of the list of objects. Each header was an object of two strings
 * for Floodgate to resolve and write and for the client to parse, for every
 * decision; as one text Floodgate executed 0.96x the instructions a check
 * under the client's batches (npm run server:instructions -- --client), and
 * the bench's three rules' headers took 435 bytes of the answer, not 493.
 *
 * The text splits back into the same headers: a name is an HTTP token (no
 * ":"), so a line's first ": " ends it; and neither a name nor a value holds
 * a line end (HTTP allows none in a field, and Floodgate's are numbers and
 * structured fields of printable characters).
 */

import type { HttpHeader } from "./decision.js";

const LINE_END = "\n";
const SEPARATOR = ": ";

export function headerLinesOf(headers: readonly HttpHeader[]): string {
  let lines = "";
  for (let i = 0; i < headers.length; i++) lines += `${i === 0 ? "" : LINE_END}${headers[i]!.name}${SEPARATOR}${headers[i]!.value}`;
  return lines;
}

/** The headers headerLinesOf wrote: none for "". */
export function headersOfLines(lines: string): HttpHeader[] {
  if (lines === "") return [];
  const headers: HttpHeader[] = [];
  for (const line of lines.split(LINE_END)) {
    const end = line.indexOf(SEPARATOR);
    headers.push({ name: line.slice(0, end), value: line.slice(end + SEPARATOR.length) });
  }
  return headers;
}
