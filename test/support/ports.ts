/** In-memory stand-ins for the ports, for tests that run the engine in-process. */

import { ConflictError } from "../../src/domain/errors.js";
import type { CounterCall, CounterReply, CounterStore, RuleRepository } from "../../src/domain/ports.js";
import type { Rule, RuleSpec } from "../../src/domain/rule.js";

/** A counter store that records, for every decide(), how many calls it was given. */
export class CountingCounterStore implements CounterStore {
  readonly description = "counting";
  readonly decideSizes: number[] = [];
  constructor(private readonly inner: CounterStore) {}

  decide(calls: readonly CounterCall[]): Promise<CounterReply[]> {
    this.decideSizes.push(calls.length);
    return this.inner.decide(calls);
  }

  reset(ruleId: string, key: string): Promise<boolean> {
    return this.inner.reset(ruleId, key);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The RuleRepository port in a Map: all the in-process tests need of rule storage. */
export class InMemoryRuleRepository implements RuleRepository {
  private readonly rules = new Map<string, Rule>();

  async list(): Promise<Rule[]> {
    return [...this.rules.values()];
  }

  async get(id: string): Promise<Rule | null> {
    return this.rules.get(id) ?? null;
  }

  async create(id: string, spec: RuleSpec): Promise<Rule> {
    if ([...this.rules.values()].some((r) => r.tenantId === spec.tenantId && r.name === spec.name)) {
      throw new ConflictError(`input.name: tenant ${spec.tenantId} already has a rule named ${spec.name}`);
    }
    const now = new Date();
    const rule: Rule = { ...spec, id, version: 1, createdAt: now, updatedAt: now };
    this.rules.set(id, rule);
    return rule;
  }

  async update(id: string, spec: RuleSpec, version: number): Promise<Rule | null> {
    const current = this.rules.get(id);
    if (current === undefined || current.version !== version) return null;
    const rule: Rule = { ...current, ...spec, version: version + 1, updatedAt: new Date() };
    this.rules.set(id, rule);
    return rule;
  }

  async delete(id: string): Promise<Rule | null> {
    const current = this.rules.get(id) ?? null;
    this.rules.delete(id);
    return current;
  }

  async close(): Promise<void> {}
}
