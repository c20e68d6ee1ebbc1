import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { HttpHeader } from "../../src/domain/decision.js";
import { headerLinesOf, headersOfLines } from "../../src/domain/header-lines.js";

/** An HTTP field name: a token, which never holds ":" (RFC 9110 §5.1). */
const name = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,30}$/);
/** A field value as HTTP allows it: visible characters, spaces and tabs, no line end (RFC 9110 §5.5); ": " and "," included. */
const value = fc.stringMatching(/^[\t\x20-\x7e]{0,60}$/);

describe("a decision's headers as lines (LimitDecision.headerLines)", () => {
  it("writes each header as a Name: value line, the lines joined by a line feed", () => {
    const headers: HttpHeader[] = [
      { name: "X-RateLimit-Limit", value: "5" },
      { name: "Retry-After", value: "37" },
      { name: "RateLimit-Policy", value: '"per-user";q=5;w=60;pk=:FPSzfl0eqn2xspO/:' },
    ];
    expect(headerLinesOf(headers)).toBe('X-RateLimit-Limit: 5\nRetry-After: 37\nRateLimit-Policy: "per-user";q=5;w=60;pk=:FPSzfl0eqn2xspO/:');
  });

  it("writes no headers as the empty text, and reads the empty text as no headers", () => {
    expect(headerLinesOf([])).toBe("");
    expect(headersOfLines("")).toEqual([]);
  });

  it("reads back the headers it wrote, in their order, whatever their values hold (': ', commas, an empty value)", () => {
    fc.assert(
      fc.property(fc.array(fc.record({ name, value }), { maxLength: 8 }), (headers) => {
        expect(headersOfLines(headerLinesOf(headers))).toEqual(headers);
      }),
    );
  });
});
