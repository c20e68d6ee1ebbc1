/**
 * The composition root: the one place that knows every implementation and
 * wires them together. Everything else receives what it needs.
 */

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { buildApiSchema } from "./api/schema.js";
import { SettingsError, type Settings } from "./config/settings.js";
import { openDatabase } from "./db/database.js";
import { PrismaRuleRepository } from "./db/prisma-rule-repository.js";
import { ConflictError } from "./domain/errors.js";
import { systemClock, type Clock, type CounterStore, type EventBus } from "./domain/ports.js";
import { CoalescingEventBus } from "./engine/coalescing-event-bus.js";
import { Limiter } from "./engine/limiter.js";
import { RuleBook } from "./engine/rule-book.js";
import { describeProblem } from "./engine/rule-import.js";
import { RuleService } from "./engine/rule-service.js";
import { RuleSync } from "./engine/rule-sync.js";
import { startHttpServer } from "./server/http-server.js";
import { createLogger, type Logger } from "./server/logger.js";
import { InProcessEventBus } from "./store/memory/in-process-event-bus.js";
import { MemoryCounterStore } from "./store/memory/memory-counter-store.js";
import { KeyLayout } from "./store/redis/key-layout.js";
import { RedisCounterStore } from "./store/redis/redis-counter-store.js";
import { RedisEventBus } from "./store/redis/redis-event-bus.js";

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

/** A RULES_FILE import that meets another instance importing the same file at the same moment tries again this many times. */
const RULES_FILE_ATTEMPTS = 3;

export async function startApp(settings: Settings, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(settings.logLevel);
  const closers = new Closers(logger);
  try {
    const core = await openCore(settings, logger, options.clock ?? systemClock, closers);
    const sync = new RuleSync(core.book, core.repository, core.events, {
      reloadIntervalMs: settings.ruleReloadIntervalMs,
      onReloadError: (error) => logger.warn({ err: error }, "reloading the rules failed; keeping the rules already loaded"),
    });
    closers.add(async () => sync.close());
    const loaded = await sync.start();
    logger.info({ rules: loaded }, "rules loaded");
    if (settings.rulesFile !== null) await importRulesFile(core.rules, settings.rulesFile, logger);

    const services = { rules: core.rules, limiter: new Limiter(core.book, core.counters, core.events, core.clock), events: core.events };
    const server = await startHttpServer(
      {
        schema: await buildApiSchema(core.events),
        services,
        logger,
        introspection: settings.introspection,
        maxBodyBytes: settings.maxBodyBytes,
        readiness: () => ({ ready: core.book.lastLoadedAt !== null, rules: core.book.size }),
      },
      settings.port,
      settings.host,
    );
    closers.add(() => server.close());
    return { url: server.url, storage: { rules: core.database.description, counters: core.counters.description }, logger, close: () => closers.close() };
  } catch (error) {
    await closers.close();
    throw error;
  }
}

/**
 * Rule administration without serving (`npm run rules` against the database):
 * the same rule service, whose changes reach running instances through Redis
 * when REDIS_URL is set, and otherwise at their next full reload.
 */
export async function openRuleAdministration(settings: Settings, logger: Logger): Promise<{ rules: RuleService; close(): Promise<void> }> {
  const closers = new Closers(logger);
  try {
    const core = await openCore(settings, logger, systemClock, closers);
    return { rules: core.rules, close: () => closers.close() };
  } catch (error) {
    await closers.close();
    throw error;
  }
}

/** Storage, counters, the event bus and the rule service: what serving and administration share. */
async function openCore(settings: Settings, logger: Logger, clock: Clock, closers: Closers) {
  const database = await openDatabase(
    settings.databaseUrl
      ? { kind: "postgres", url: settings.databaseUrl }
      : { kind: "pglite", dataDir: settings.dataDir === null ? null : join(settings.dataDir, "pglite") },
  );
  closers.add(() => database.close());
  if (database.applied.length > 0) logger.info({ migrations: database.applied }, "applied database migrations");

  const counters = await openCounterStore(settings);
  closers.add(() => counters.close());

  const events = new CoalescingEventBus(await openEventBus(settings, logger), {
    intervalMs: settings.eventIntervalMs,
    maxKeys: settings.eventMaxKeys,
  });
  closers.add(() => events.close());

  const book = new RuleBook();
  const repository = new PrismaRuleRepository(database.prisma);
  const rules = new RuleService(repository, book, counters, events, clock);
  return { database, counters, events, book, repository, rules, clock };
}

async function openCounterStore(settings: Settings): Promise<CounterStore> {
  if (settings.redisUrl === null) return new MemoryCounterStore();
  const client = new Redis(settings.redisUrl, { enableAutoPipelining: true, maxRetriesPerRequest: 2, lazyConnect: true });
  await client.connect();
  return new RedisCounterStore(client, { layout: new KeyLayout(settings.redisKeyPrefix, settings.redisPages) });
}

/** With Redis, instances sharing REDIS_KEY_PREFIX hear each other's events; without it, events stay in this process. */
async function openEventBus(settings: Settings, logger: Logger): Promise<EventBus> {
  if (settings.redisUrl === null) return new InProcessEventBus();
  const publisher = new Redis(settings.redisUrl, { maxRetriesPerRequest: 2, lazyConnect: true });
  const subscriber = publisher.duplicate();
  const instanceId = randomUUID();
  const bus = new RedisEventBus(publisher, subscriber, {
    prefix: settings.redisKeyPrefix,
    instanceId,
    onError: (error, what) => logger.warn({ err: error }, `event bus: ${what} failed`),
  });
  try {
    await publisher.connect();
    await bus.start();
  } catch (error) {
    await bus.close();
    throw error;
  }
  logger.info({ instanceId }, "listening for other instances' events on Redis");
  return bus;
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
      const report = await rules.importRules(text, { dryRun: false });
      if (report.invalid.length > 0) {
        const problems = report.invalid.map((problem) => `  ${describeProblem(path, problem)}`).join("\n");
        throw new SettingsError(`RULES_FILE ${path} is invalid, so none of it was applied:\n${problems}`);
      }
      const counts = { created: report.created.length, updated: report.updated.length, unchanged: report.unchanged.length };
      logger.info({ file: path, ...counts }, "RULES_FILE applied");
      return;
    } catch (error) {
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
