/** Input written to hurt the service that reads it. */

/** 9⁴ scope entries from a few lines of aliases, in the first of two entries (the second is fine). */
export function aliasBomb(tenantId: string): string {
  return `laughs:
  - &a [x, x, x, x, x, x, x, x, x]
  - &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
  - &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
rules:
  - tenantId: ${tenantId}
    scope: [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    name: bomb
    limit: 1
    window: 1
  - {tenantId: ${tenantId}, name: fine, limit: 1, window: 1}
`;
}

/**
 * The globs validation accepts that cost a match the most steps found, against
 * the longest paths a request may name (see COSTLY_PATHS): a segment's
 * longest infix, never found, and as many floating segments as allowed, of one
 * character, of 15 and of wildcards, failing at the last.
 */
export const COSTLIEST_GLOBS = [
  "/*" + "a".repeat(31) + "b*",
  "/**/a/b/**",
  "/**/*a*/*b*/**",
  "/**/" + "a".repeat(15) + "/" + "a".repeat(14) + "b/**",
];

/** Paths of the longest length a request may name, of one segment, of one-character segments, and of 15-character ones. */
export function costlyPaths(length: number): string[] {
  return ["/" + "a".repeat(length - 1), "/a".repeat(length / 2), ("/" + "a".repeat(15)).repeat(length / 16)];
}
