/** Prometheus metrics at GET /metrics (prom-client), fed by the engine's Telemetry. */

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { BreakerState } from "../domain/circuit-breaker.js";
import type { DecisionOutcome, Telemetry } from "../domain/telemetry.js";

const BREAKER_VALUES: Record<BreakerState, number> = { closed: 0, "half-open": 1, open: 2 };

export interface MetricsSources {
  ruleCount: () => number;
  /** When the rules were last known to be the database's (RuleBook.lastLoadedAt), or null. */
  rulesLoadedAt: () => Date | null;
}

interface DecisionSeries {
  labels: { tenant: string; rule: string; outcome: DecisionOutcome };
  /** Verdicts not yet handed to the counter. */
  uncounted: number;
}

/**
 * How often the event loop's lag is sampled (floodgate_process_nodejs_eventloop_lag_*).
 * prom-client's 10 ms woke an idle instance 100 times a second, all of its
 * idle work; every 100 ms still gives a 15 s scrape 150 samples, and catches
 * any stall of 100 ms or more.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

export class PrometheusTelemetry implements Telemetry {
  readonly registry = new Registry();
  private readonly decisions: Counter<"tenant" | "rule" | "outcome">;
  /**
   * The decisions counter's series by tenant, rule and outcome, each with the
   * verdicts counted since the last scrape. prom-client hashes a series'
   * labels on every increment, three times a check of three rules (about a
   * thirtieth of a check's CPU in a checkLimitsBatch), so a verdict only adds
   * one to its series here, and the counter takes the sums when it is
   * collected (a scrape, or any read of the registry). As many series as
   * prom-client keeps anyway.
   */
  private readonly decisionSeries = new Map<string, Map<string, Map<DecisionOutcome, DecisionSeries>>>();
  private readonly checkSeconds: Histogram;
  private readonly checks: Counter;
  private readonly storeSeconds: Histogram;
  private readonly storeErrors: Counter;
  private readonly breaker: Gauge<"node">;
  private readonly subscriptions: Gauge;
  private readonly dropped: Counter;
  private readonly leases: Counter;
  private readonly leasedUnits: Counter<"use">;
  private readonly regionLinks: Gauge<"region">;
  private readonly regionShipments: Counter<"region">;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "floodgate_process_", eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    this.decisions = new Counter({
      name: "floodgate_rule_decisions_total",
      help: "Rule verdicts by the rule's tenant, the rule's id and the outcome (allowed, denied, shadow, degraded).",
      labelNames: ["tenant", "rule", "outcome"],
      registers,
      collect: () => this.flushDecisions(),
    });
    this.checkSeconds = new Histogram({
      name: "floodgate_check_duration_seconds",
      help: "Time to decide one call of the limiter (one check, or the checks of one operation together).",
      buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.checks = new Counter({ name: "floodgate_checks_total", help: "Checks decided.", registers });
    this.storeSeconds = new Histogram({
      name: "floodgate_counter_store_duration_seconds",
      help: "Round trips to the counter store (Redis), successful or not.",
      buckets: [0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers,
    });
    this.storeErrors = new Counter({
      name: "floodgate_counter_store_errors_total",
      help: "Counter store round trips that failed or missed their deadline.",
      registers,
    });
    this.breaker = new Gauge({
      name: "floodgate_circuit_breaker_state",
      help: "Counter store breaker of each shard (a Redis Cluster master, or the one Redis), by node: 0 closed, 1 half-open, 2 open.",
      labelNames: ["node"],
      registers,
    });
    this.subscriptions = new Gauge({ name: "floodgate_subscriptions", help: "Open GraphQL subscriptions.", registers });
    this.dropped = new Counter({ name: "floodgate_events_dropped_total", help: "Events not delivered to subscribers that fell too far behind (their subscriptions were ended).", registers });
    this.leases = new Counter({ name: "floodgate_leases_total", help: "Leases of hot buckets taken from the counter store (LEASE_HOT_CHECKS_PER_SECOND).", registers });
    this.leasedUnits = new Counter({
      name: "floodgate_leased_units_total",
      help: "Units of hot buckets' leases: taken from the counter store, and admitted from them without a round trip.",
      labelNames: ["use"],
      registers,
    });
    this.regionLinks = new Gauge({
      name: "floodgate_region_link_up",
      help: "Each other region (REGION_PEERS): 1 while it is reachable both ways, 0 while GLOBAL rules decide by REGION_PARTITION_MODE.",
      labelNames: ["region"],
      registers,
    });
    this.regionShipments = new Counter({
      name: "floodgate_region_shipped_buckets_total",
      help: "Buckets of GLOBAL rules whose state this instance shipped to each other region.",
      labelNames: ["region"],
      registers,
    });
    new Gauge({
      name: "floodgate_rules",
      help: "Rules held in memory.",
      registers,
      collect() {
        this.set(sources.ruleCount());
      },
    });
    new Gauge({
      name: "floodgate_rules_load_age_seconds",
      help: "Seconds since the rules were last known to be the database's: loaded in full, or found with nothing written since.",
      registers,
      collect() {
        const at = sources.rulesLoadedAt();
        this.set(at === null ? -1 : (Date.now() - at.getTime()) / 1000);
      },
    });
  }

  ruleDecided(tenantId: string, ruleId: string, outcome: DecisionOutcome): void {
    let rules = this.decisionSeries.get(tenantId);
    if (rules === undefined) this.decisionSeries.set(tenantId, (rules = new Map()));
    let outcomes = rules.get(ruleId);
    if (outcomes === undefined) rules.set(ruleId, (outcomes = new Map()));
    let series = outcomes.get(outcome);
    if (series === undefined) outcomes.set(outcome, (series = { labels: { tenant: tenantId, rule: ruleId, outcome }, uncounted: 0 }));
    series.uncounted++;
  }

  private flushDecisions(): void {
    for (const rules of this.decisionSeries.values()) {
      for (const outcomes of rules.values()) {
        for (const series of outcomes.values()) {
          if (series.uncounted === 0) continue;
          this.decisions.inc(series.labels, series.uncounted);
          series.uncounted = 0;
        }
      }
    }
  }

  checked(seconds: number, checks: number): void {
    this.checkSeconds.observe(seconds);
    this.checks.inc(checks);
  }

  storeCalled(seconds: number, failed: boolean): void {
    this.storeSeconds.observe(seconds);
    if (failed) this.storeErrors.inc();
  }

  breakerChanged(shard: string, state: BreakerState): void {
    this.breaker.set({ node: shard }, BREAKER_VALUES[state]);
  }

  breakerForgotten(shard: string): void {
    this.breaker.remove({ node: shard });
  }

  subscriptionOpened(): void {
    this.subscriptions.inc();
  }

  subscriptionClosed(): void {
    this.subscriptions.dec();
  }

  eventsDropped(count: number): void {
    this.dropped.inc(count);
  }

  leaseTaken(units: number): void {
    this.leases.inc();
    this.leasedUnits.inc({ use: "taken" }, units);
  }

  leaseUsed(units: number): void {
    this.leasedUnits.inc({ use: "admitted" }, units);
  }

  regionLinkChanged(region: string, up: boolean): void {
    this.regionLinks.set({ region }, up ? 1 : 0);
  }

  regionShipped(region: string, buckets: number): void {
    this.regionShipments.inc({ region }, buckets);
  }
}

/** The checks' fast path (src/api/fast-path/) at GET /metrics: the query texts it keeps, and the bytes it estimates they hold. */
export function registerFastPathGauges(registry: Registry, cache: { readonly size: number; readonly bytes: number }): void {
  const registers = [registry];
  new Gauge({
    name: "floodgate_fast_path_documents",
    help: "Query texts the checks' fast path keeps (compiled, or known to be Apollo's).",
    registers,
    collect() {
      this.set(cache.size);
    },
  });
  new Gauge({
    name: "floodgate_fast_path_bytes",
    help: "Heap those hold, as the fast path estimates it (bounded by FAST_PATH_CACHE_BYTES).",
    registers,
    collect() {
      this.set(cache.bytes);
    },
  });
}

/** The gRPC listener's calls (GRPC_PORT) at GET /metrics, by method and status code; returns what to tell of each call. */
export function registerGrpcMetrics(registry: Registry): (method: string, code: string, seconds: number) => void {
  const registers = [registry];
  const calls = new Counter({ name: "floodgate_grpc_calls_total", help: "gRPC calls by method and status code.", labelNames: ["method", "code"], registers });
  const seconds = new Histogram({
    name: "floodgate_grpc_call_duration_seconds",
    help: "Time to answer a gRPC call, by method.",
    labelNames: ["method"],
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
    registers,
  });
  return (method, code, took) => {
    calls.inc({ method, code });
    seconds.observe({ method }, took);
  };
}
