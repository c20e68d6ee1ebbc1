/**
 * The composition root: the one place that knows every implementation and
 * wires them together. Everything else receives what it needs.
 */

import { join } from "node:path";
import { Cluster, Redis } from "ioredis";
import { buildApiSchema } from "./api/schema.js";
import type { RedisTopology, Settings } from "./config/settings.js";
import { openDatabase } from "./db/database.js";
import { PrismaRuleRepository } from "./db/prisma-rule-repository.js";
import { systemClock, type Clock, type CounterStore } from "./domain/ports.js";
import { Limiter } from "./engine/limiter.js";
import { RuleBook } from "./engine/rule-book.js";
import { RuleService } from "./engine/rule-service.js";
import { startHttpServer } from "./server/http-server.js";
import { createLogger, type Logger } from "./server/logger.js";
import { InProcessEventBus } from "./store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "./store/memory/memory-counter-store.js";
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
    if (database.applied.length > 0) logger.info({ migrations: database.applied }, "applied database migrations");

    const counters = await openCounterStore(settings, logger);
    closers.push(() => counters.close());

    const events = new InProcessEventBus();
    closers.push(() => events.close());

    const book = new RuleBook();
    const rules = new RuleService(new PrismaRuleRepository(database.prisma), book, counters, events, clock);
    const loaded = await rules.reload();
    logger.info({ rules: loaded }, "rules loaded");

    const services = { rules, limiter: new Limiter(book, counters, events, clock), events };
    const server = await startHttpServer(
      {
        schema: await buildApiSchema(events),
        services,
        logger,
        introspection: settings.introspection,
        maxBodyBytes: settings.maxBodyBytes,
        readiness: () => ({ ready: book.lastLoadedAt !== null, rules: book.size }),
      },
      settings.port,
      settings.host,
    );
    closers.push(() => server.close());
    return { url: server.url, storage: { rules: database.description, counters: counters.description }, logger, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function openCounterStore(settings: Settings, logger: Logger): Promise<CounterStore> {
  if (settings.redis === null) return new MemoryCounterStore();
  const client = redisClient(settings.redis);
  await client.connect();
  return new RedisCounterStore(client, {
    layout: new KeyLayout(settings.redisKeyPrefix, settings.redisPages),
    onReleaseFailed: (error, units) =>
      logger.warn({ err: error, units }, "could not give back a denied request's reservation: its units stay counted until they expire"),
  });
}

function redisClient(topology: RedisTopology): Redis | Cluster {
  const options = { maxRetriesPerRequest: 2, lazyConnect: true } as const;
  switch (topology.kind) {
    case "single":
      return new Redis(topology.url, { ...options, enableAutoPipelining: true });
    case "sentinel":
      return new Redis({ ...options, enableAutoPipelining: true, sentinels: topology.sentinels, name: topology.masterName });
    case "cluster":
      // No auto-pipelining: the store sends each slot's command at once itself (see RedisCounterStore).
      return new Cluster(topology.nodes, { lazyConnect: true, redisOptions: { maxRetriesPerRequest: options.maxRetriesPerRequest } });
  }
}
