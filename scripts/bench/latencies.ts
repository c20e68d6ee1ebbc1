/**
 * Response times kept at full resolution (milliseconds, fractional), so that
 * a sub-millisecond p99 is computed exactly rather than read from a histogram
 * of whole milliseconds.
 */
export class Latencies {
  private values = new Float64Array(1 << 16);
  private recorded = 0;

  get count(): number {
    return this.recorded;
  }

  record(ms: number): void {
    if (this.recorded === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.recorded++] = ms;
  }

  /** p50, p99 and p99.9 in milliseconds; NaN when nothing was recorded. */
  percentiles(): { p50: number; p99: number; p999: number } {
    const count = this.recorded;
    const sorted = this.values.subarray(0, count).sort();
    const at = (p: number) => (count === 0 ? NaN : sorted[Math.min(count - 1, Math.ceil((p / 100) * count) - 1)]!);
    return { p50: at(50), p99: at(99), p999: at(99.9) };
  }
}
