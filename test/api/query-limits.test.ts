/**
 * The query limits measure a document in work proportional to what is
 * written, not to what its fragments expand to, and stop once a limit is
 * passed. Work is counted, never timed: every selection list of the document
 * is wrapped so that reading one of its selections counts a visit, and past
 * a budget throws (so that a measure that expands fragments fails at once
 * instead of running for hours).
 */

import { readFileSync } from "node:fs";
import fc from "fast-check";
import { buildSchema, getIntrospectionQuery, Kind, parse, validate, type DocumentNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode } from "graphql";
import { describe, expect, it } from "vitest";
import { QueryMeasure, queryLimits, STANDARD_INTROSPECTION_DEPTH, type QueryCost } from "../../src/api/query-limits.js";
import { fragmentFanOut } from "../support/hostile-documents.js";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 200);
const schema = buildSchema(readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8"));

/** The document with every selection read counted; more than `budget` reads throw. */
function countingVisits(query: string, budget: number): { document: DocumentNode; visits: () => number; selections: number } {
  let visits = 0;
  let selections = 0;
  const wrap = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(wrap);
    if (node === null || typeof node !== "object") return node;
    const copy = Object.fromEntries(Object.entries(node).map(([key, value]) => [key, wrap(value)]));
    if (copy.kind !== Kind.SELECTION_SET) return copy;
    selections += (copy.selections as unknown[]).length;
    copy.selections = new Proxy(copy.selections as object[], {
      get(target, property, receiver) {
        if (typeof property === "string" && /^\d+$/.test(property) && ++visits > budget) throw new Error(`read more than ${budget} selections`);
        return Reflect.get(target, property, receiver);
      },
    });
    return copy;
  };
  return { document: wrap(parse(query, { noLocation: true })) as DocumentNode, visits: () => visits, selections };
}

function operationOf(document: DocumentNode): OperationDefinitionNode {
  return document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
}

/** The cost of documents without introspection (their `introspectionDepth` is 0). */
function measured(document: DocumentNode, maxDepth: number, maxFields: number): QueryCost {
  const { depth, fields, introspectionDepth } = new QueryMeasure(document, maxDepth, maxFields).operation(operationOf(document));
  expect(introspectionDepth).toBe(0);
  return { depth, fields };
}

describe("the query limits' measure", () => {
  it("validating a fragment fan-out reads each of its selections at most twice (graphql's walk, and the measure), from 1 to 12 levels (up to 2 × 10^11 fields expanded)", () => {
    for (let levels = 1; levels <= 12; levels++) {
      const written = countingVisits(fragmentFanOut(levels), 0).selections;
      expect(written).toBe(10 * (levels - 1) + 3);
      const { document, visits } = countingVisits(fragmentFanOut(levels), 2 * written);
      const errors = validate(schema, document, [queryLimits(12, 5000)]);
      expect(visits()).toBeLessThanOrEqual(2 * written);
      expect(errors.length, `${levels} levels`).toBe(levels >= 5 ? 1 : 0);
    }
  });

  it("stops once past the field limit: 10,000 aliases against a limit of 100 read about 100 selections", () => {
    const query = `{ ${Array.from({ length: 10_000 }, (_, i) => `a${i}: __typename`).join(" ")} }`;
    const { document, visits } = countingVisits(query, 10_000);
    expect(measured(document, 12, 100).fields).toBe(101);
    expect(visits()).toBe(101);
  });

  it("stops once past the depth limit, in a document 1,000 levels deep", () => {
    const query = `{ ${"rules { rule { ".repeat(500)}id${" }".repeat(1000)} }`;
    const { document, visits } = countingVisits(query, 2_000);
    expect(measured(document, 12, 5000).depth).toBe(13);
    expect(visits()).toBe(13);
  });

  it("counts exactly what the fragments expand to, whenever it is within the limits (property: against expanding every spread)", () => {
    fc.assert(
      fc.property(fragmentDagArbitrary, fc.integer({ min: 2, max: 8 }), fc.integer({ min: 10, max: 200 }), (query, maxDepth, maxFields) => {
        const document = parse(query, { noLocation: true });
        const expanded = expand(operationOf(document).selectionSet, fragmentsOf(document));
        const cost = measured(document, maxDepth, maxFields);
        const over = (c: QueryCost) => c.depth > maxDepth || c.fields > maxFields;
        expect(over(cost)).toBe(over(expanded));
        if (!over(expanded)) expect(cost).toEqual(expanded);
      }),
      { numRuns: RUNS },
    );
  });
});

describe("the query limits' validation rule", () => {
  const errorsOf = (query: string, maxDepth: number, maxFields: number) => validate(schema, parse(query), [queryLimits(maxDepth, maxFields)]).map((e) => e.message);

  it("refuses a 12-level fragment fan-out (about 1 KB, 2 × 10^11 fields) as selecting too many fields", () => {
    const query = fragmentFanOut(12);
    expect(query.length).toBeLessThan(1_100);
    expect(errorsOf(query, 12, 5000)).toEqual(["the query selects more than 5000 fields in all; at most 5000 are allowed (use checkLimitsBatch for many checks)"]);
  });

  it("accepts a fan-out within the limits, and refuses one level too deep", () => {
    expect(errorsOf(fragmentFanOut(3), 12, 5000)).toEqual([]);
    expect(errorsOf("{ rules { rule { id } } }", 2, 5000)).toEqual(["the query is more than 2 levels deep; at most 2 are allowed"]);
    expect(errorsOf("{ rules { rule { id } } }", 3, 5000)).toEqual([]);
  });

  const everyOption = {
    descriptions: true,
    specifiedByUrl: true,
    directiveIsRepeatable: true,
    schemaDescription: true,
    inputValueDeprecation: true,
    experimentalDirectiveDeprecation: true,
    oneOf: true,
  };

  it("accepts graphql-js's getIntrospectionQuery() (15 levels), with its default options and with every option, under a depth limit of 12", () => {
    expect(STANDARD_INTROSPECTION_DEPTH).toBe(15);
    expect(errorsOf(getIntrospectionQuery(), 12, 5000)).toEqual([]);
    expect(errorsOf(getIntrospectionQuery(everyOption), 12, 5000)).toEqual([]);
  });

  it("refuses introspection deeper than the standard query, and an ordinary field as deep as it, in the same document too", () => {
    expect(errorsOf(getIntrospectionQuery({ typeDepth: 10 }), 12, 5000)).toEqual([
      "the introspection is more than 15 levels deep; at most 15 are allowed (as deep as graphql-js's getIntrospectionQuery())",
    ]);
    const thirteenLevels = `${"rules { rule { ".repeat(6)}id${" }".repeat(12)}`;
    expect(errorsOf(`{ ${thirteenLevels} }`, 12, 5000)).toEqual(["the query is more than 12 levels deep; at most 12 are allowed"]);
    expect(errorsOf(`{ __schema { queryType { name } } ${thirteenLevels} }`, 12, 5000)).toEqual(["the query is more than 12 levels deep; at most 12 are allowed"]);
  });

  it("keeps the higher of the two when the depth limit is above the standard query's", () => {
    expect(errorsOf(getIntrospectionQuery({ typeDepth: 10 }), 16, 5000)).toEqual([]);
  });

  it("counts the introspection's fields towards the field limit", () => {
    expect(errorsOf(getIntrospectionQuery(), 12, 100)).toEqual(["the query selects more than 100 fields in all; at most 100 are allowed (use checkLimitsBatch for many checks)"]);
  });
});

// ---- the reference: every spread expanded where it stands -------------------

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  return new Map(document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]));
}

function expand(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>): QueryCost {
  let depth = 0;
  let fields = 0;
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) {
      const below = selection.selectionSet ? expand(selection.selectionSet, fragments) : { depth: 0, fields: 0 };
      depth = Math.max(depth, below.depth + 1);
      fields += below.fields + 1;
    } else {
      const inner = expand(selection.kind === Kind.INLINE_FRAGMENT ? selection.selectionSet : fragments.get(selection.name.value)!.selectionSet, fragments);
      depth = Math.max(depth, inner.depth);
      fields += inner.fields;
    }
  }
  return { depth, fields };
}

/**
 * A query and up to four fragments on Rule, each spreading only fragments
 * defined after it (so no cycle), with nested fields and inline fragments.
 */
const fragmentDagArbitrary: fc.Arbitrary<string> = fc.integer({ min: 0, max: 4 }).chain((count) => {
  const selections = (from: number): fc.Arbitrary<string> =>
    fc.letrec<{ set: string; selection: string }>((tie) => ({
      set: fc.array(tie("selection"), { minLength: 1, maxLength: 4 }).map((items) => items.join(" ")),
      selection: fc.oneof(
        { depthSize: "small" },
        fc.constantFrom("id", "name", "a: limit"),
        from < count ? fc.integer({ min: from, max: count - 1 }).map((i) => `...F${i}`) : fc.constant("id"),
        tie("set").map((inner) => `nested { ${inner} }`),
        tie("set").map((inner) => `... on Rule { ${inner} }`),
      ),
    })).set;
  const fragments = Array.from({ length: count }, (_, i) => selections(i + 1).map((body) => `fragment F${i} on Rule { ${body} }`));
  return fc.tuple(selections(0), ...fragments).map(([body, ...defined]) => [`{ rules { ${body} } }`, ...defined].join("\n"));
});
