/**
 * Heap kept per compiled check document of the fast path, per field it
 * selects and per character of its text:
 * `npx tsx --expose-gc scripts/fast-path-memory.ts`. Each shape of document
 * is parsed and compiled with graphql-jit as the fast path does, several
 * times over (distinct texts: the cache keeps one compiled query per text),
 * with the texts and results kept alive, and the heap is read after full
 * garbage collections before and after. The fast-path cache's estimate
 * (src/api/fast-path/compiled-checks.ts, COMPILED_BYTES and COMPILED_BYTES_PER_FIELD)
 * must stay above every figure printed here.
 */

import { Kind, parse, type OperationDefinitionNode } from "graphql";
import { compileQuery } from "graphql-jit";
import { QueryMeasure } from "../src/api/query-limits.js";
import { buildApiSchema } from "../src/api/schema.js";
import { InProcessEventBus } from "../src/store/memory/in-process-event-bus.js";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node's --expose-gc: npx tsx --expose-gc scripts/fast-path-memory.ts");

const RULE = "rule { id tenantId name scope resource method algorithm limit window windowUnit windowSeconds burst action failureMode priority enabled version createdAt updatedAt }";
const EVERYTHING = `allowed degraded decidedAt source action limit remaining resetAt retryAfter delayMs nearLimit ${RULE} results { key allowed limit remaining resetAt retryAfter delayMs consulted nearLimit ${RULE} } headers { name value }`;
const aliased = (count: number, selection: string) =>
  `query Aliased { ${Array.from({ length: count }, (_, i) => `c${i}: checkLimits(request: { tenantId: "acme", userId: "u${i}" }) { ${selection} }`).join(" ")} }`;

const SHAPES: [string, string, number][] = [
  ["one checkLimits { allowed }", 'query Check($r: CheckLimitsInput!) { checkLimits(request: $r) { allowed } }', 400],
  ["one checkLimits, every field", `query Check($r: CheckLimitsInput!) { checkLimits(request: $r) { ${EVERYTHING} } }`, 200],
  ["checkLimitsBatch, every field", `query Batch($r: [CheckLimitsInput!]!) { checkLimitsBatch(requests: $r) { ${EVERYTHING} } }`, 200],
  ["10 aliased checkLimits { allowed remaining }", aliased(10, "allowed remaining"), 100],
  ["100 aliased checkLimits { allowed remaining }", aliased(100, "allowed remaining"), 20],
  ["1000 aliased checkLimits { allowed remaining }", aliased(1000, "allowed remaining"), 3],
  ["1000 aliased checkLimits, 4 fields each", aliased(1000, "allowed remaining nearLimit delayMs"), 3],
  ["100 aliased checkLimits, every field", aliased(100, EVERYTHING), 3],
  // As many fields as few characters allow: one-letter aliases, no spaces, the request in a variable.
  ["dense: 100 checkLimits{results{rule{id}}}", `query D($r:CheckLimitsInput!){${Array.from({ length: 100 }, (_, i) => `c${i}:checkLimits(request:$r){results{rule{id}}}`).join("")}}`, 5],
  ["dense: 20 checkLimits, 40 aliased ids each", `query D($r:CheckLimitsInput!){${Array.from({ length: 20 }, (_, i) => `c${i}:checkLimits(request:$r){rule{${Array.from({ length: 40 }, (_, j) => `i${j}:id`).join(" ")}}}`).join("")}}`, 5],
  ["one checkLimits with a 50,000-character literal", `{ checkLimits(request: { tenantId: "acme", userAgent: "${"x".repeat(50_000)}" }) { allowed } }`, 20],
  ["fragment of every field, spread in 50 aliases", `query F($r:CheckLimitsInput!){${Array.from({ length: 50 }, (_, i) => `c${i}:checkLimits(request:$r){...E}`).join("")}} fragment E on LimitDecision { ${EVERYTHING} }`, 5],
  ["dense: 20 checkLimits, 40 aliased results each", `query D($r:CheckLimitsInput!){${Array.from({ length: 20 }, (_, i) => `c${i}:checkLimits(request:$r){${Array.from({ length: 40 }, (_, j) => `r${j}:results{key}`).join(" ")}}`).join("")}}`, 5],
];

function heapAfterGc(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const schema = await buildApiSchema(new InProcessEventBus());
  console.log("fast-path memory: heap kept per compiled check document (graphql-jit), after full garbage collections");
  let perField = 0;
  let perCharacter = 0;
  for (const [name, query, copies] of SHAPES) {
    const kept: unknown[] = [];
    const before = heapAfterGc();
    for (let i = 0; i < copies; i++) {
      // A distinct text each time, as distinct documents would be.
      const text = `${query} # ${i}`;
      kept.push(text, compileQuery(schema, parse(text), undefined));
    }
    const perDocument = (heapAfterGc() - before) / copies;
    const document = parse(query);
    const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
    const { fields } = new QueryMeasure(document, Infinity, Infinity).operation(operation);
    perCharacter = Math.max(perCharacter, perDocument / query.length);
    // The fixed part is what one checkLimits { allowed } holds; every other shape is weighed per field past it.
    if (fields > 2) perField = Math.max(perField, perDocument / fields);
    console.log(
      `  ${name.padEnd(48)} ${String(query.length).padStart(7)} chars ${String(fields).padStart(6)} fields ${(perDocument / 1024).toFixed(0).padStart(7)} KiB each` +
        `  ${(perDocument / query.length).toFixed(0).padStart(5)} B/char ${(perDocument / fields).toFixed(0).padStart(6)} B/field`,
    );
    kept.length = 0;
  }
  console.log(`largest: ${perField.toFixed(0)} bytes per field (documents of more than 2 fields), ${perCharacter.toFixed(0)} bytes per character of query text`);
}

await main();
