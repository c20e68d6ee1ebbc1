/**
 * How deep a GraphQL document's brackets nest, read from its text in one pass
 * before anything parses it (see MAX_DOCUMENT_NESTING): strings, block
 * strings and comments are skipped, so brackets inside them do not count.
 * The pass stops as soon as the bound is passed.
 */

import { GraphQLError } from "graphql";
import { MAX_DOCUMENT_NESTING } from "../domain/service-limits.js";

/** Whether the document nests its brackets deeper than `max`. Read by character codes: every check's document passes here. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    switch (text.charCodeAt(i)) {
      case 0x7b: // {
      case 0x5b: // [
      case 0x28: // (
        if (++depth > max) return true;
        break;
      case 0x7d: // }
      case 0x5d: // ]
      case 0x29: // )
        depth = Math.max(0, depth - 1);
        break;
      case 0x23: // #, a comment to the end of its line
        while (i < text.length && text[i] !== "\n" && text[i] !== "\r") i++;
        break;
      case 0x22: // ", a string or a block string
        i = text.startsWith('"""', i) ? endOfBlockString(text, i + 3) : endOfString(text, i + 1);
        break;
    }
  }
  return false;
}

/** The error that refuses a document nested too deep, coded as graphql-js's parse errors are. */
export function tooDeeplyNested(): GraphQLError {
  return new GraphQLError(`the document nests brackets more than ${MAX_DOCUMENT_NESTING} deep`, { extensions: { code: "GRAPHQL_PARSE_FAILED" } });
}

/** Index of the closing quote of a string whose text starts at `from` (or the end of the text). */
function endOfString(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"' || text[i] === "\n") return i;
  }
  return text.length;
}

/** Index of the last quote of a block string whose text starts at `from` (escaped \""" does not end it). */
function endOfBlockString(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    if (text.startsWith('\\"""', i)) i += 3;
    else if (text.startsWith('"""', i)) return i + 2;
  }
  return text.length;
}
