/**
 * The composition root: the one place that knows every implementation and
 * wires them together. Everything else receives what it needs.
 */

import { join } from "node:path";
import { MAX_BATCH } from "./api/resolvers/limit.resolver.js";
import { buildApiSchema } from "./api/schema.js";
import type { Settings } from "./config/settings.js";
import { openDatabase } from "./db/database.js";
import { PrismaRuleRepository } from "./db/prisma-rule-repository.js";
import { RuleSnapshotFile } from "./db/rule-snapshot-file.js";
import { systemClock, type Clock, type CounterStore } from "./domain/ports.js";
import { CircuitBreaker } from "./engine/circuit-breaker.js";
import { Limiter } from "./engine/limiter.js";
import { CHECKS_PER_TIMEOUT, ResilientCounterStore } from "./engine/resilient-counter-store.js";
import { RuleBook } from "./engine/rule-book.js";
import { RuleLoader } from "./engine/rule-loader.js";
import { RuleService } from "./engine/rule-service.js";
import { startHttpServer } from "./server/http-server.js";
import { createLogger, type Logger } from "./server/logger.js";
import { InProcessEventBus } from "./store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "./store/memory/memory-counter-store.js";
import { createRedisClient } from "./store/redis/client.js";
import { KeyLayout } from "./store/redis/key-layout.js";
import { RedisCounterStore } from "./store/redis/redis-counter-store.js";

export interface App {
  url: string;
  /** What holds the rules and the counters, in words. */
  storage: { rules: string; counters: string };
  logger: Logger;
  close(): Promise<void>;
}

export interface AppOptions {
  logger?: Logger;
  clock?: Clock;
}

export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(settings.logLevel);
  const clock = options.clock ?? systemClock;
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer().catch((error: unknown) => logger.warn({ err: error }, "error while closing"));
  };
  try {
    const database = await openDatabase(
      settings.databaseUrl
        ? { kind: "postgres", url: settings.databaseUrl }
        : { kind: "pglite", dataDir: settings.dataDir === null ? null : join(settings.dataDir, "pglite") },
    );
    closers.push(() => database.close());

    const counters = await openCounterStore(settings, clock, logger);
    closers.push(() => counters.store.close());

    const events = new InProcessEventBus();
    closers.push(() => events.close());

    const book = new RuleBook();
    const repository = new PrismaRuleRepository(database.prisma);
    const loader = new RuleLoader({
      repository,
      book,
      events,
      prepare: async () => {
        const applied = await database.migrate();
        if (applied.length > 0) logger.info({ migrations: applied }, "applied database migrations");
      },
      // Embedded storage lives on this disk already; only a remote database needs a local copy of its rules.
      snapshot: settings.databaseUrl && settings.dataDir ? new RuleSnapshotFile(join(settings.dataDir, "rules-snapshot.json")) : null,
      retryMs: settings.ruleRetryMs,
      log: logger,
    });
    await loader.start();
    closers.push(() => loader.close());
    logger.info({ rules: book.size, source: loader.source }, "rules loaded");

    const rules = new RuleService(repository, book, counters.store, events, clock);
    const services = { rules, limiter: new Limiter(book, counters.store, events, clock), events };
    const server = await startHttpServer(
      {
        schema: await buildApiSchema(events),
        services,
        logger,
        introspection: settings.introspection,
        maxBodyBytes: settings.maxBodyBytes,
        shutdownTimeoutMs: settings.shutdownTimeoutMs,
        readiness: () => ({
          ready: book.lastLoadedAt !== null,
          rules: { count: book.size, source: loader.source, loadedAt: book.lastLoadedAt },
          counters: { store: counters.store.description, breaker: counters.breaker?.state ?? null },
        }),
      },
      settings.port,
      settings.host,
    );
    closers.push(() => server.close());
    return { url: server.url, storage: { rules: database.description, counters: counters.store.description }, logger, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function openCounterStore(settings: Settings, clock: Clock, logger: Logger): Promise<{ store: CounterStore; breaker: CircuitBreaker | null }> {
  if (settings.redis === null) return { store: new MemoryCounterStore({ clock }), breaker: null };
  // The largest batch's deadline: no command may outlive the longest any caller waits for it.
  const client = createRedisClient(settings.redis, settings.redisTimeoutMs * Math.ceil(MAX_BATCH / CHECKS_PER_TIMEOUT));
  // ioredis reconnects by itself; the breaker decides what checks do meanwhile, so connection errors are only worth a debug line.
  client.on("error", (error: Error) => logger.debug({ err: error }, "Redis connection error"));
  client.on("ready", () => logger.info("Redis connected"));
  try {
    await client.connect();
  } catch (error) {
    logger.warn({ err: error }, "Redis is unreachable: checks are decided by each rule's failureMode until it comes back");
  }
  const breaker = new CircuitBreaker({
    failureThreshold: settings.breakerFailures,
    openMs: settings.breakerOpenMs,
    clock,
    onStateChange: (state) => logger.warn({ breaker: state }, `counter store circuit breaker ${state}`),
  });
  const store = new ResilientCounterStore({
    primary: new RedisCounterStore(client, {
      layout: new KeyLayout(settings.redisKeyPrefix, settings.redisPages),
      onReleaseFailed: (error, units) =>
        logger.warn({ err: error, units }, "could not give back a denied request's reservation: its units stay counted until they expire"),
    }),
    local: new MemoryCounterStore({ clock }),
    breaker,
    instances: settings.instances,
    timeoutMs: settings.redisTimeoutMs,
    clock,
  });
  return { store, breaker };
}
