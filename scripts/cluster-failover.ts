/**
 * A Redis Cluster master killed under load, through the whole service:
 * `npm run cluster:failover`. Starts a cluster (3 masters, 3 replicas, node
 * timeout 1 s) and Floodgate on it with its default deadlines and breaker,
 * kills a master, and prints how long its slots went without a master, how
 * long until checks on them were decided by Redis again, and how every check
 * was decided meanwhile (test/harness/cluster-failover.ts).
 *
 *   --callers N     concurrent callers (default 32)
 *   --warmup-ms N   load before the kill (default 2000)
 *   --after-ms N    load once checks are back on Redis (default 2000)
 */

import "reflect-metadata";
import { describeFailover, runClusterFailover } from "../test/harness/cluster-failover.js";
import { numberOption } from "../test/harness/number-option.js";


const report = await runClusterFailover({
  callers: numberOption("callers", 32),
  warmupMs: numberOption("warmup-ms", 2000),
  afterMs: numberOption("after-ms", 2000),
  resumeWithinMs: 60_000,
});
for (const line of describeFailover(report)) console.log(`cluster failover: ${line}`);
