/** GraphQL documents written to cost the server far more than they cost to send, for the tests of the API's own limits. */

/**
 * `levels` fragments, each spreading the next `spreads` times, the last
 * selecting one checkLimits (two fields): about 85 bytes a level, and
 * 2 × spreads^(levels - 1) fields once every spread is expanded (12 levels:
 * about a kilobyte, 2 × 10^11 fields).
 */
export function fragmentFanOut(levels: number, spreads = 10): string {
  const fragments = Array.from({ length: levels }, (_, i) =>
    i === levels - 1
      ? `fragment F${i} on Query { checkLimits(request: { tenantId: "fan-out" }) { allowed } }`
      : `fragment F${i} on Query { ${`...F${i + 1} `.repeat(spreads)}}`,
  );
  return [`query FanOut { ...F0 }`, ...fragments].join("\n");
}
