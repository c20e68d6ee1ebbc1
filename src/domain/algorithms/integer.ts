/**
 * Exact integer division for the counter arithmetic. Every quantity the
 * algorithms compute stays below 2^53, so doubles hold them exactly, but a
 * quotient a / b is rounded before Math.floor sees it; these correct it. The
 * Lua scripts carry the same two functions, so both sides round alike.
 */

/** Integers the arithmetic may reach; rule validation keeps every rule below it. */
export const MAX_EXACT = 2 ** 52;

/** floor(a / b) for integers a >= 0, b > 0. */
export function divFloor(a: number, b: number): number {
  let q = Math.floor(a / b);
  if (q * b > a) q -= 1;
  else if ((q + 1) * b <= a) q += 1;
  return q;
}

/** ceil(a / b) for integers a >= 0, b > 0. */
export function divCeil(a: number, b: number): number {
  const q = divFloor(a, b);
  return q * b < a ? q + 1 : q;
}
