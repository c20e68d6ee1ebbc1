/**
 * The composition root: the one place that knows every implementation and
 * wires them together. Everything else receives what it needs.
 */

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { buildApiSchema } from "./api/schema.js";
import { resolveAdminToken } from "./config/admin-token.js";
import { openPrivateDataDir, removeForeignAccess } from "./config/data-dir.js";
import { SettingsError, type RegionSettings, type Settings } from "./config/settings.js";
import type { Cluster, Redis } from "ioredis";
import { ApiKeySnapshotFile } from "./db/api-key-snapshot-file.js";
import { openDatabase, type Database } from "./db/database.js";
import { PrismaAccessListRepository } from "./db/prisma-access-list-repository.js";
import { PrismaApiKeyRepository } from "./db/prisma-api-key-repository.js";
import { PrismaBanRepository } from "./db/prisma-ban-repository.js";
import { PrismaRuleRepository } from "./db/prisma-rule-repository.js";
import { AccessListSnapshotFile } from "./db/access-list-snapshot-file.js";
import { BanSnapshotFile } from "./db/ban-snapshot-file.js";
import { RuleSnapshotFile } from "./db/rule-snapshot-file.js";
import { ConflictError, ValidationError } from "./domain/errors.js";
import { systemClock, type Clock, type CounterStore, type EventBus } from "./domain/ports.js";
import { MAX_BATCH } from "./domain/service-limits.js";
import { ApiKeyService, BOOTSTRAP } from "./engine/access/api-key-service.js";
import { AccessListIndex } from "./engine/access-lists/access-list-index.js";
import { AccessListService } from "./engine/access-lists/access-list-service.js";
import { AccessListSync } from "./engine/access-lists/access-list-sync.js";
import { CoalescingEventBus } from "./store/coalescing-event-bus.js";
import { KnownApiKeys } from "./engine/access/known-api-keys.js";
import { AutoBanner } from "./engine/bans/auto-banner.js";
import { BanScreen } from "./engine/bans/ban-screen.js";
import { BanService } from "./engine/bans/ban-service.js";
import { Limiter } from "./engine/decision/limiter.js";
import { MutationLimiter } from "./engine/access/mutation-limiter.js";
import { OverLimitCache } from "./engine/decision/over-limit-cache.js";
import { CHECKS_PER_TIMEOUT, ResilientCounterStore } from "./store/resilient-counter-store.js";
import { LeasingCounterStore } from "./store/leasing-counter-store.js";
import { BatchingCounterStore } from "./store/batching-counter-store.js";
import { RegionalCounterStore } from "./store/regions/regional-counter-store.js";
import { RuleBook } from "./engine/decision/rule-book.js";
import { describeProblem } from "./engine/rules/rule-import.js";
import { RuleService } from "./engine/rules/rule-service.js";
import { RuleSync } from "./engine/rules/rule-sync.js";
import { noTelemetry, type Telemetry } from "./domain/telemetry.js";
import { listenToEvents } from "./event-listeners.js";
import { startHttpServer } from "./server/http-server.js";
import { atMostEvery, createLogger, type Logger } from "./server/logger.js";
import { startMetricsListener } from "./server/metrics-endpoint.js";
import { PrometheusTelemetry, registerGrpcMetrics } from "./server/metrics.js";
import { startGrpcServer } from "./server/grpc-server.js";
import { RateLimitService } from "./api/envoy/rate-limit-service.js";
import { InProcessEventBus } from "./store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "./store/memory/memory-counter-store.js";
import { MemoryRefusalCounter } from "./store/memory/memory-refusal-counter.js";
import { connectAtStart, createRedisClient, createSubscriber, misconfiguration } from "./store/redis/client.js";
import { KeyLayout } from "./store/redis/key-layout.js";
import { RedisCounterStore } from "./store/redis/redis-counter-store.js";
import { RedisEventBus } from "./store/redis/redis-event-bus.js";
import { RedisRefusalCounter } from "./store/redis/redis-refusal-counter.js";
import { RedisUsageStore } from "./store/redis/redis-usage-store.js";
import { MemoryUsageStore } from "./store/memory/memory-usage-store.js";
import { UsageRecorder } from "./engine/usage/usage-recorder.js";
import { UsageService } from "./engine/usage/usage-service.js";
import type { Health } from "./domain/health.js";

export interface App {
  url: string;
  /** GRPC_PORT's listener ("host:port": Envoy's rate limit service and grpc.health.v1), or null. */
  grpcAddress: string | null;
  /** METRICS_PORT's listener (GET /metrics without a token), or null. */
  metricsUrl: string | null;
  /** What holds the rules and the counters, in words. */
  storage: { rules: string; counters: string };
  logger: Logger;
  close(): Promise<void>;
}

export interface AppOptions {
  logger?: Logger;
  clock?: Clock;
  /** Where lines for the person starting the service go (the generated admin token): stderr by default, never the log. */
  announce?: (line: string) => void;
}

/** A RULES_FILE import that meets another instance importing the same file at the same moment tries again this many times. */
const RULES_FILE_ATTEMPTS = 3;

export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(settings.logLevel);
  const announce = options.announce ?? ((line: string) => process.stderr.write(`${line}\n`));
  const closers = new Closers(logger);
  try {
    const book = new RuleBook();
    const telemetry = new PrometheusTelemetry({ ruleCount: () => book.size, rulesLoadedAt: () => book.lastLoadedAt });
    const core = await openCore(settings, { logger, clock: options.clock ?? systemClock, closers, book, telemetry });
    const sync = new RuleSync({
      repository: core.repository,
      book,
      events: core.events,
      prepare: () => migrate(core.database, logger),
      // Embedded storage lives on this disk already; only a remote database needs a local copy of its rules.
      snapshot: settings.databaseUrl && settings.dataDir ? new RuleSnapshotFile(join(settings.dataDir, "rules-snapshot.json"), settings.databaseUrl) : null,
      reloadIntervalMs: settings.ruleReloadIntervalMs,
      retryMs: settings.ruleRetryMs,
      log: logger,
    });
    closers.add(() => sync.close());
    await sync.start();
    logger.info({ rules: book.size, source: sync.source }, "rules loaded");
    const lists = new AccessListIndex();
    // Like the rules' snapshot: only a remote database needs a local copy of what it holds.
    const lastKnownGood = <T>(file: string, make: (path: string, databaseUrl: string) => T): T | null =>
      settings.databaseUrl && settings.dataDir ? make(join(settings.dataDir, file), settings.databaseUrl) : null;
    const listSync = new AccessListSync({
      repository: core.listRepository,
      index: lists,
      events: core.events,
      reloadIntervalMs: settings.ruleReloadIntervalMs,
      snapshot: lastKnownGood("access-lists-snapshot.json", (path, url) => new AccessListSnapshotFile(path, url)),
      log: logger,
    });
    closers.add(() => listSync.close());
    await listSync.start();
    if (settings.rulesFile !== null) await importRulesFile(core.rules, settings.rulesFile, logger);

    const keyRepository = new PrismaApiKeyRepository(core.database.prisma);
    const knownKeys = new KnownApiKeys({
      repository: keyRepository,
      // Like the rules' snapshot: only a remote database needs a local copy of its keys.
      snapshot: settings.databaseUrl && settings.dataDir ? new ApiKeySnapshotFile(join(settings.dataDir, "api-keys-snapshot.json"), settings.databaseUrl) : null,
      reloadIntervalMs: settings.ruleReloadIntervalMs,
      log: logger,
    });
    closers.add(() => knownKeys.close());
    await knownKeys.start();

    const overLimit = settings.overLimitCacheSize > 0 ? new OverLimitCache(settings.overLimitCacheSize) : undefined;
    const keys = new ApiKeyService(keyRepository, {
      adminToken: await resolveAdminToken(settings, announce),
      clock: core.clock,
      cacheMs: settings.apiKeyCacheMs,
      events: core.events,
      known: knownKeys,
    });
    const banScreen = new BanScreen();
    const bans = new BanService({
      repository: new PrismaBanRepository(core.database.prisma),
      screen: banScreen,
      events: core.events,
      clock: core.clock,
      reloadIntervalMs: settings.ruleReloadIntervalMs,
      snapshot: lastKnownGood("bans-snapshot.json", (path, url) => new BanSnapshotFile(path, url)),
      log: logger,
    });
    closers.add(() => bans.close());
    await bans.start();
    const autoBanner = new AutoBanner({
      counter: core.redis === null ? new MemoryRefusalCounter(core.clock) : new RedisRefusalCounter(core.redis, settings.redisKeyPrefix),
      bans,
      screen: banScreen,
      clock: core.clock,
      log: logger,
    });
    listenToEvents(core.events, { overLimit, keys, leases: core.leasing });
    const { recorder, usage } = openUsage(settings, core, closers, logger);
    const readiness = () => ({
      ready: book.lastLoadedAt !== null,
      rules: { count: book.size, source: sync.source, loadedAt: book.lastLoadedAt },
      counters: { store: core.counters.description, breakers: core.resilient?.breakerStates() ?? {}, ...(core.regional ? { regions: core.regional.linkStates() } : {}) },
    });
    const health = async (): Promise<Health> => {
      const breakers = Object.entries(core.resilient?.breakerStates() ?? {}).map(([shard, state]) => ({ shard, state }));
      return {
        degraded: breakers.some(({ state }) => state !== "closed"),
        breakers,
        rules: { source: sync.source, count: book.size, loadedAt: book.lastLoadedAt },
        // Every live instance flushes once per interval; three intervals leave room for a slow one.
        instances: recorder ? await usage.instancesSince(3 * settings.usageFlushMs).catch(() => null) : null,
      };
    };
    // Asked in this order before any rule (domain/screening.ts): a deny list entry, then a ban, then an allow list entry.
    const screens = [lists.deny, banScreen, lists.allow];
    const services = {
      rules: core.rules,
      accessLists: core.accessLists,
      limiter: new Limiter(book, core.counters, core.events, core.clock, { telemetry, overLimit, usage: recorder, screens, refusals: autoBanner }),
      keys,
      bans,
      mutations: new MutationLimiter(core.counters, core.clock, settings.adminMutationsPerMinute),
      events: core.events,
      usage,
      health,
    };
    const server = await startHttpServer(
      {
        schema: await buildApiSchema(core.events, telemetry),
        services,
        logger,
        metrics: telemetry.registry,
        metricsToken: settings.metricsToken,
        introspection: settings.introspection,
        graphiql: settings.graphiql,
        maxBodyBytes: settings.maxBodyBytes,
        maxQueryDepth: settings.maxQueryDepth,
        maxQueryFields: settings.maxQueryFields,
        fastPathCacheSize: settings.fastPathCacheSize,
        fastPathCacheBytes: settings.fastPathCacheBytes,
        maxSubscriptionsPerSocket: settings.maxSubscriptionsPerSocket,
        maxSocketsPerKey: settings.maxSocketsPerKey,
        apiKeyCacheMs: settings.apiKeyCacheMs,
        shutdownTimeoutMs: settings.shutdownTimeoutMs,
        readiness,
      },
      settings.port,
      settings.host,
    );
    closers.add(() => server.close());
    const grpc = settings.grpc
      ? await startGrpcServer(
          {
            rateLimits: new RateLimitService({ limiter: services.limiter, keys, domainTenants: settings.grpc.domainTenants }),
            ready: () => book.lastLoadedAt !== null,
            tls: settings.grpc.tls,
            shutdownTimeoutMs: settings.shutdownTimeoutMs,
            maxMessageBytes: settings.maxBodyBytes,
            onCall: registerGrpcMetrics(telemetry.registry),
            logger,
          },
          settings.grpc.port,
          settings.grpc.host,
        )
      : null;
    if (grpc !== null) closers.add(() => grpc.close());
    const metrics = settings.metricsListener
      ? await startMetricsListener(telemetry.registry, settings.metricsListener.port, settings.metricsListener.host, (error) =>
          logger.error({ err: error }, "metrics listener: a scrape failed"),
        )
      : null;
    if (metrics !== null) closers.add(() => metrics.close());
    return {
      url: server.url,
      grpcAddress: grpc?.address ?? null,
      metricsUrl: metrics?.url ?? null,
      storage: { rules: core.database.description, counters: core.counters.description },
      logger,
      close: () => closers.close(),
    };
  } catch (error) {
    await closers.close();
    throw error;
  }
}

/**
 * Usage over time (docs/dashboard.md#usage-data): counted by this instance
 * unless USAGE_FLUSH_MS is 0, kept in Redis with it (every instance's counts
 * summed) and in this process without, read by the usage service either way.
 */
function openUsage(
  settings: Settings,
  core: { redis: Redis | Cluster | null; clock: Clock; rules: RuleService },
  closers: Closers,
  logger: Logger,
): { recorder: UsageRecorder | undefined; usage: UsageService } {
  const store = core.redis === null ? new MemoryUsageStore() : new RedisUsageStore(core.redis, settings.redisKeyPrefix);
  const usage = new UsageService(store, (principal, id) => core.rules.get(principal, id), core.clock);
  if (settings.usageFlushMs === 0) return { recorder: undefined, usage };
  const recorder = new UsageRecorder({
    store,
    clock: core.clock,
    instanceId: randomUUID(),
    flushMs: settings.usageFlushMs,
    onFlushFailed: (error) => logger.debug({ err: error }, "usage counts could not be added to the store: that interval is missing from the charts"),
  });
  closers.add(() => recorder.close());
  return { recorder, usage };
}

/**
 * Rule administration without serving (`npm run rules` against the database):
 * the same rule service, acting with every right (whoever holds the
 * database's credentials has them anyway), whose changes reach running
 * instances through Redis when one is configured, and otherwise at their next
 * full reload.
 */
export async function openRuleAdministration(settings: Settings, logger: Logger): Promise<{ rules: RuleService; close(): Promise<void> }> {
  const closers = new Closers(logger);
  try {
    const core = await openCore(settings, { logger, clock: systemClock, closers, book: new RuleBook(), telemetry: noTelemetry });
    await migrate(core.database, logger);
    return { rules: core.rules, close: () => closers.close() };
  } catch (error) {
    await closers.close();
    throw error;
  }
}

interface CoreOptions {
  logger: Logger;
  clock: Clock;
  closers: Closers;
  book: RuleBook;
  telemetry: Telemetry;
}

/** Storage, counters, the event bus and the rule service: what serving and administration share (and the settings' warnings, logged first). */
async function openCore(settings: Settings, { logger, clock, closers, book, telemetry }: CoreOptions) {
  for (const warning of settings.deprecations) logger.warn(warning);
  if (settings.dataDir !== null) openPrivateDataDir(settings.dataDir);
  const database = await openDatabase(
    settings.databaseUrl
      ? { kind: "postgres", url: settings.databaseUrl }
      : { kind: "pglite", dataDir: settings.dataDir === null ? null : join(settings.dataDir, "pglite") },
  );
  closers.add(() => database.close());
  // PGlite has just chmodded its files open (see data-dir.ts).
  if (settings.dataDir !== null) removeForeignAccess(settings.dataDir);

  const { store: counters, resilient, leasing, regional, redis } = await openCounterStore(settings, clock, logger, telemetry);
  closers.add(() => counters.close());

  const events = new CoalescingEventBus(await openEventBus(settings, logger), {
    intervalMs: settings.eventIntervalMs,
    maxKeys: settings.eventMaxKeys,
  });
  closers.add(() => events.close());

  const repository = new PrismaRuleRepository(database.prisma);
  const listRepository = new PrismaAccessListRepository(database.prisma);
  const accessLists = new AccessListService(listRepository, events, clock);
  const rules = new RuleService(repository, book, counters, events, clock, settings.ruleLimits, accessLists);
  return { database, counters, resilient, leasing, regional, redis, events, repository, rules, listRepository, accessLists, clock };
}

async function migrate(database: Database, logger: Logger): Promise<void> {
  const applied = await database.migrate();
  if (applied.length > 0) logger.info({ migrations: applied }, "applied database migrations");
}

async function openCounterStore(
  settings: Settings,
  clock: Clock,
  logger: Logger,
  telemetry: Telemetry,
): Promise<{ store: CounterStore; resilient: ResilientCounterStore | null; leasing?: LeasingCounterStore; regional?: RegionalCounterStore | null; redis: Redis | Cluster | null }> {
  if (settings.redis === null) return { store: new MemoryCounterStore({ clock }), resilient: null, redis: null };
  // The largest batch's deadline: no command may outlive the longest any caller waits for it.
  const client = createRedisClient(settings.redis, settings.redisTimeoutMs * Math.ceil(MAX_BATCH / CHECKS_PER_TIMEOUT), settings.redisSecurity);
  watchConnection(client, "counters", logger);
  // Unreachable is no reason not to start; credentials or a certificate Redis refuses are: waiting will not mend them.
  const connection = await connectAtStart(client);
  if ("misconfigured" in connection) throw new SettingsError(connection.misconfigured);
  if (!connection.connected) {
    logger.warn({ err: connection.error }, "Redis is unreachable: checks are decided by each rule's failureMode until it comes back");
  }
  const layout = new KeyLayout(settings.redisKeyPrefix, settings.redisPages);
  const redisStore = new RedisCounterStore(client, {
    layout,
    onReleaseFailed: (error, units) =>
      logger.warn({ err: error, units }, "could not give back a denied request's reservation: its units stay counted until they expire"),
  });
  const regional = settings.regions === null ? null : openRegions(settings, settings.regions, { local: redisStore, localRedis: client, layout, clock, logger, telemetry });
  const store = new ResilientCounterStore({
    primary: regional ?? redisStore,
    local: new MemoryCounterStore({ clock }),
    breakers: { failureThreshold: settings.breakerFailures, openMs: settings.breakerOpenMs },
    onBreakerChange: (node, state) => logger.warn({ node, breaker: state }, `counter store circuit breaker of ${node} ${state}`),
    onCallFailed: atMostEvery(60_000, (error: unknown, leftOut) =>
      logger.error({ err: error, leftOut }, "Redis answered but could not decide a check on its buckets (a key of another type, or a state decide.lua cannot read): decided by failure mode"),
    ),
    instances: settings.instances,
    timeoutMs: settings.redisTimeoutMs,
    clock,
    telemetry,
  });
  // A turn's checks go to Redis together (batching-counter-store.ts), each caller's deadline as it was alone.
  const batching = (inner: CounterStore) => new BatchingCounterStore({ inner, maxCallsPerDecide: CHECKS_PER_TIMEOUT });
  if (settings.leaseHotChecksPerSecond === 0) return { store: batching(store), resilient: store, regional, redis: client };
  const leasing = new LeasingCounterStore({ inner: store, clock, hotChecksPerSecond: settings.leaseHotChecksPerSecond, leaseMs: settings.leaseMs, maxLeaseMs: settings.leaseMaxMs, telemetry });
  return { store: batching(leasing), resilient: store, leasing, regional, redis: client };
}

/**
 * The regional store in front of this region's Redis: a client and a store
 * on each other region's Redis (the same key layout: regions share rules and
 * REDIS_KEY_PREFIX), shipping started. Another region's Redis that cannot be
 * reached at start is no reason not to start: GLOBAL rules decide by the
 * partition mode until it answers.
 */
function openRegions(
  settings: Settings,
  regions: RegionSettings,
  { local, localRedis, layout, clock, logger, telemetry }: { local: RedisCounterStore; localRedis: Redis | Cluster; layout: KeyLayout; clock: Clock; logger: Logger; telemetry: Telemetry },
): RegionalCounterStore {
  const peers = regions.peers.map(({ name, url }) => {
    const redis = createRedisClient({ kind: "single", url }, settings.redisTimeoutMs * 20, settings.redisSecurity);
    watchConnection(redis, `region ${name}`, logger);
    void redis.connect().catch(() => undefined);
    return { name, redis, store: new RedisCounterStore(redis, { layout }) };
  });
  const regional = new RegionalCounterStore({
    local,
    localRedis,
    region: regions.name,
    peers,
    keyPrefix: settings.redisKeyPrefix,
    syncMs: regions.syncMs,
    partitionAfterMs: regions.partitionAfterMs,
    partitionMode: regions.partitionMode,
    clock,
    telemetry,
    onLinkChange: (region, up) =>
      up ? logger.info({ region }, `region ${region} reachable: GLOBAL rules count its usage`) : logger.warn({ region }, `region ${region} cut off: GLOBAL rules decide by REGION_PARTITION_MODE ${regions.partitionMode}`),
  });
  regional.start();
  return regional;
}

/**
 * With Redis, instances sharing REDIS_KEY_PREFIX hear each other's events;
 * without it, events stay in this process. A Redis that is down at start
 * does not stop the start: publishing fails quietly meanwhile, and ioredis
 * subscribes again by itself once it reconnects.
 */
async function openEventBus(settings: Settings, logger: Logger): Promise<EventBus> {
  if (settings.redis === null) return new InProcessEventBus();
  const publisher = createRedisClient(settings.redis, settings.redisTimeoutMs * 20, settings.redisSecurity);
  const subscriber = createSubscriber(publisher);
  watchConnection(publisher, "events", logger);
  watchConnection(subscriber, "event subscriber", logger);
  const instanceId = randomUUID();
  const bus = new RedisEventBus(publisher, subscriber, {
    prefix: settings.redisKeyPrefix,
    instanceId,
    onError: (error, what) => logger.debug({ err: error }, `event bus: ${what} failed`),
  });
  await publisher.connect().catch(() => undefined);
  void bus.start().catch((error: unknown) => logger.warn({ err: error }, "event bus: subscribing failed"));
  logger.info({ instanceId }, "listening for other instances' events on Redis");
  return bus;
}

/**
 * ioredis reconnects by itself; the breaker decides what checks do meanwhile, so connection errors are only worth a debug line,
 * unless Redis refuses the credentials or the certificate (rotated on one side only): that will not pass by itself, and is
 * logged as an error once per connection lost (not at every reconnection attempt).
 */
function watchConnection(client: ReturnType<typeof createRedisClient>, role: string, logger: Logger): void {
  let refusalLogged = false;
  client.on("error", (error: Error) => {
    const problem = misconfiguration(error);
    if (problem === null || refusalLogged) return logger.debug({ err: error, role }, "Redis connection error");
    refusalLogged = true;
    logger.error({ err: error, role }, problem);
  });
  client.on("ready", () => {
    refusalLogged = false;
    logger.info({ role }, "Redis connected");
  });
}

async function importRulesFile(rules: RuleService, path: string, logger: Logger): Promise<void> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new SettingsError(`RULES_FILE ${path} cannot be read: ${(error as Error).message}`);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      // The operator's own file, named in the service's settings: applied with every right.
      const report = await rules.importRules(BOOTSTRAP, text, { dryRun: false });
      if (report.invalid.length > 0) {
        const problems = report.invalid.map((problem) => `  ${describeProblem(path, problem)}`).join("\n");
        throw new SettingsError(`RULES_FILE ${path} is invalid, so none of it was applied:\n${problems}`);
      }
      const counts = {
        created: report.created.length,
        updated: report.updated.length,
        unchanged: report.unchanged.length,
        listEntriesAdded: report.listEntriesAdded,
        listEntriesUnchanged: report.listEntriesUnchanged,
      };
      logger.info({ file: path, ...counts }, "RULES_FILE applied");
      return;
    } catch (error) {
      // Too large, or past a tenant's rule quota: the file's fault, told in one line like its problems.
      if (error instanceof ValidationError) throw new SettingsError(`RULES_FILE ${path} cannot be imported, so none of it was applied: ${error.message}`);
      if (!(error instanceof ConflictError) || attempt >= RULES_FILE_ATTEMPTS) throw error;
    }
  }
}

/** What to close on shutdown (or when a start fails half-way), in the reverse order of opening. */
class Closers {
  private readonly closers: (() => Promise<void>)[] = [];

  constructor(private readonly logger: Logger) {}

  add(closer: () => Promise<void>): void {
    this.closers.push(closer);
  }

  async close(): Promise<void> {
    for (const closer of this.closers.splice(0).reverse()) {
      await closer().catch((error: unknown) => this.logger.warn({ err: error }, "error while closing"));
    }
  }
}
