/**
 * How a GLOBAL rule (one limit shared by every region) decides while this
 * region cannot reach another (src/store/regions/regional-counter-store.ts):
 *   SHARE         on this region's counts alone, under its share of the limit
 *   FAILURE_MODE  by the rule's failureMode (OPEN: on what the region knows,
 *                 CLOSED: refused, LOCAL: as SHARE)
 */
export const PARTITION_MODES = ["SHARE", "FAILURE_MODE"] as const;
export type PartitionMode = (typeof PARTITION_MODES)[number];
