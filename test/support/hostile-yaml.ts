/** Rules files written to hurt the service that reads them. */

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
