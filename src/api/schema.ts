import "reflect-metadata";
import type { GraphQLSchema } from "graphql";
import { buildSchema } from "type-graphql";
import type { EventBus } from "../domain/ports.js";
import { noTelemetry, type Telemetry } from "../domain/telemetry.js";
import { DateTimeScalar } from "./date-time.js";
import { eventBusPubSub } from "./event-pubsub.js";
import { AccessListResolver } from "./resolvers/access-list.resolver.js";
import { ApiKeyResolver } from "./resolvers/api-key.resolver.js";
import { BanResolver } from "./resolvers/ban.resolver.js";
import { EventResolver } from "./resolvers/event.resolver.js";
import { LimitResolver, resolveChecksDirectly, resolveHeaderLines } from "./resolvers/limit.resolver.js";
import { OverrideResolver } from "./resolvers/override.resolver.js";
import { RuleResolver } from "./resolvers/rule.resolver.js";
import { RulesFileResolver } from "./resolvers/rules-file.resolver.js";
import { UsageResolver } from "./resolvers/usage.resolver.js";

/** The API's schema, built from the type-graphql classes; schema.graphql at the root is this, printed. */
export async function buildApiSchema(events: EventBus, telemetry: Telemetry = noTelemetry): Promise<GraphQLSchema> {
  const schema = await buildSchema({
    resolvers: [RuleResolver, OverrideResolver, RulesFileResolver, LimitResolver, ApiKeyResolver, EventResolver, UsageResolver, AccessListResolver, BanResolver],
    scalarsMap: [{ type: Date, scalar: DateTimeScalar }],
    pubSub: eventBusPubSub(events, telemetry),
    // Inputs are validated by the domain, with messages that name the field.
    validate: false,
  });
  resolveChecksDirectly(schema);
  resolveHeaderLines(schema);
  return schema;
}
