/**
 * Rule management: validate, write through the repository, and make the
 * change visible — to this instance's rule book before the call returns (its
 * very next check uses it), and to everyone else through the event bus.
 */

import { randomUUID } from "node:crypto";
import { ConflictError, NotFoundError, ValidationError } from "../domain/errors.js";
import type { RuleChange, RuleChangeKind } from "../domain/events.js";
import type { Clock, CounterStore, EventBus, RuleRepository } from "../domain/ports.js";
import { hasControlCharacters } from "../domain/request.js";
import type { Rule, RuleSpec } from "../domain/rule.js";
import { specOf, validateNewRule, validateRuleChange, type RuleInput } from "../domain/rule-validation.js";
import type { RuleBook } from "./rule-book.js";

/** Concurrent writers without expectedVersion retry this many times before reporting a conflict. */
const UPDATE_ATTEMPTS = 5;
const MAX_BUCKET_KEY = 4096;

export class RuleService {
  constructor(
    private readonly repository: RuleRepository,
    private readonly book: RuleBook,
    private readonly store: CounterStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
  ) {}

  get(id: string): Rule | null {
    return this.book.get(id);
  }

  list(tenantId?: string | null): Rule[] {
    return this.book.list(tenantId);
  }

  async create(input: RuleInput): Promise<Rule> {
    const spec = validateNewRule(input);
    const rule = await this.repository.create(randomUUID(), spec);
    await this.publish("CREATED", rule);
    return rule;
  }

  async update(id: string, input: RuleInput, expectedVersion?: number | null): Promise<Rule> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.repository.get(id);
      if (current === null) throw new NotFoundError("rule", id);
      if (expectedVersion !== undefined && expectedVersion !== null && current.version !== expectedVersion) {
        throw staleVersion(id, expectedVersion, current.version);
      }
      const spec = validateRuleChange(current, input);
      if (sameSpec(spec, specOf(current))) return current;
      const updated = await this.repository.update(id, spec, current.version);
      if (updated !== null) {
        await this.publish("UPDATED", updated);
        return updated;
      }
      if (expectedVersion !== undefined && expectedVersion !== null) {
        const now = await this.repository.get(id);
        if (now === null) throw new NotFoundError("rule", id);
        throw staleVersion(id, expectedVersion, now.version);
      }
      if (attempt >= UPDATE_ATTEMPTS) throw new ConflictError(`rule ${id} kept changing while it was being updated; try again`);
    }
  }

  async delete(id: string): Promise<boolean> {
    const deleted = await this.repository.delete(id);
    if (deleted === null) throw new NotFoundError("rule", id);
    await this.publish("DELETED", deleted);
    return true;
  }

  /** Forgets one bucket of one rule. */
  async resetLimit(ruleId: string, key: string): Promise<boolean> {
    if (this.book.get(ruleId) === null) throw new NotFoundError("rule", ruleId);
    if (key.length === 0 || key.length > MAX_BUCKET_KEY) throw new ValidationError("key", `must be 1 to ${MAX_BUCKET_KEY} characters`);
    if (hasControlCharacters(key)) throw new ValidationError("key", "must not contain control characters");
    return this.store.reset(ruleId, key);
  }

  private async publish(kind: RuleChangeKind, rule: Rule): Promise<void> {
    const change: RuleChange = {
      kind,
      ruleId: rule.id,
      tenantId: rule.tenantId,
      version: kind === "DELETED" ? rule.version + 1 : rule.version,
      rule: kind === "DELETED" ? null : rule,
      at: new Date(this.clock.now()),
    };
    this.book.apply(change);
    await this.events.publishRuleChange(change);
  }
}

function staleVersion(id: string, expected: number, actual: number): ConflictError {
  return new ConflictError(`rule ${id} is at version ${actual}, not the expectedVersion ${expected}; read it again and retry`);
}

function sameSpec(a: RuleSpec, b: RuleSpec): boolean {
  return (Object.keys(a) as (keyof RuleSpec)[]).every((field) =>
    Array.isArray(a[field]) ? JSON.stringify(a[field]) === JSON.stringify(b[field]) : a[field] === b[field],
  );
}
