/**
 * The rules this instance enforces, compiled, in memory: a check never reads
 * the database. Changes arrive as RuleChanges (from this instance's own
 * mutations, and later from other instances) and full reloads; a rule never
 * goes back to an older version than one already seen.
 */

import type { RuleChange } from "../domain/events.js";
import type { Rule } from "../domain/rule.js";
import { compileRule, type CompiledRule } from "./compiled-rule.js";
import { RuleIndex } from "./rule-index.js";

export class RuleBook {
  private readonly rules = new Map<string, CompiledRule>();
  /** Versions of deleted rules, so a late copy of the rule does not bring it back. */
  private readonly deleted = new Map<string, number>();
  private index = new RuleIndex([]);
  private loadedAt: Date | null = null;

  /** Replaces the whole set with a fresh read of the repository. */
  load(rules: readonly Rule[]): void {
    const fresh = new Map<string, CompiledRule>();
    for (const rule of rules) {
      const known = this.rules.get(rule.id);
      fresh.set(rule.id, known && known.rule.version >= rule.version ? known : compileRule(rule));
    }
    this.rules.clear();
    for (const [id, compiled] of fresh) this.rules.set(id, compiled);
    this.deleted.clear();
    this.loadedAt = new Date();
    this.reindex();
  }

  /** Applies one change; returns false when it is older than what the book holds. */
  apply(change: RuleChange): boolean {
    const known = this.rules.get(change.ruleId)?.rule.version ?? this.deleted.get(change.ruleId) ?? 0;
    if (change.version <= known && change.kind !== "DELETED") return false;
    if (change.kind === "DELETED" || change.rule === null) {
      this.rules.delete(change.ruleId);
      this.deleted.set(change.ruleId, Math.max(known, change.version));
    } else {
      this.rules.set(change.ruleId, compileRule(change.rule));
    }
    this.reindex();
    return true;
  }

  match(...args: Parameters<RuleIndex["match"]>): CompiledRule[] {
    return this.index.match(...args);
  }

  get(id: string): Rule | null {
    return this.rules.get(id)?.rule ?? null;
  }

  list(tenantId?: string | null): Rule[] {
    const all = [...this.rules.values()].map((c) => c.rule);
    const chosen = tenantId === undefined || tenantId === null ? all : all.filter((r) => r.tenantId === tenantId);
    return chosen.sort((a, b) => a.tenantId.localeCompare(b.tenantId) || a.name.localeCompare(b.name));
  }

  get size(): number {
    return this.rules.size;
  }

  get lastLoadedAt(): Date | null {
    return this.loadedAt;
  }

  private reindex(): void {
    this.index = new RuleIndex(this.rules.values());
  }
}
