/**
 * The cap on checks per operation. A checkLimitsBatch holds at most
 * MAX_BATCH checks, and so does the whole operation: forty aliased batches
 * sharing one thousand-entry variable would otherwise make 40,000 checks in
 * one request. Every checkLimits field counts one check and every
 * checkLimitsBatch field the length of its list (written in the document, or
 * a variable's), aliases included. The count is taken from the document and
 * the variables, before any check is read, so an operation past the cap is
 * refused whole, having counted nothing.
 */

import {
  Kind,
  getArgumentValues,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLResolveInfo,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from "graphql";
import { ValidationError } from "../domain/errors.js";
import { MAX_BATCH } from "../domain/service-limits.js";
import type { ApiContext } from "./context.js";

/**
 * The checks the operation makes with these variables (as sent, or as
 * coerced: the same count for any that coerce). A field selected twice under
 * one response key runs once, and a fragment spread twice at the root adds
 * its fields once, as graphql-js collects them; @skip and @include are not
 * evaluated, so a skipped field still counts (the count errs high, never low).
 */
export function operationChecks(
  operation: OperationDefinitionNode,
  fragments: Readonly<Record<string, FragmentDefinitionNode>>,
  variables: Readonly<Record<string, unknown>> | undefined,
): number {
  let checks = 0;
  for (const field of rootFields(operation, fragments)) checks += fieldChecks(field, operation, variables);
  return checks;
}

/** The operation's root fields, one per response key, as graphql-js collects them (@skip and @include not evaluated). */
function rootFields(operation: OperationDefinitionNode, fragments: Readonly<Record<string, FragmentDefinitionNode>>): FieldNode[] {
  const keys = new Set<string>();
  const spread = new Set<string>();
  const fields: FieldNode[] = [];
  const collect = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        if (keys.has(key)) continue;
        keys.add(key);
        fields.push(selection);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        collect(selection.selectionSet);
      } else if (!spread.has(selection.name.value)) {
        spread.add(selection.name.value);
        const fragment = fragments[selection.name.value];
        if (fragment !== undefined) collect(fragment.selectionSet);
      }
    }
  };
  collect(operation.selectionSet);
  return fields;
}

export function tooManyChecks(checks: number): ValidationError {
  return new ValidationError(
    "requests",
    `must hold at most ${MAX_BATCH} checks in one operation: every checkLimits field and every request of every checkLimitsBatch counts, aliases included (got ${checks})`,
  );
}

/** Per request (each has a context of its own): the refusal of its operation, or null when admitted. */
const refusals = new WeakMap<ApiContext, ValidationError | null>();

/**
 * Run by the check fields before they read their arguments: the operation's
 * count is taken once, by the first of its check fields to run, and an
 * operation past the cap fails in every one of them, so none of its checks
 * happens.
 */
export function admitOperationChecks(context: ApiContext, info: Pick<GraphQLResolveInfo, "operation" | "fragments" | "variableValues" | "parentType">): void {
  let refusal = refusals.get(context);
  if (refusal === undefined) {
    const checks = operationChecks(info.operation, info.fragments, info.variableValues);
    refusal = checks > MAX_BATCH ? tooManyChecks(checks) : null;
    refusals.set(context, refusal);
    // A check field whose argument graphql will refuse when it runs refuses the operation's other checks too.
    if (refusal === null) {
      const refused = refusedArgumentOf(info);
      if (refused !== undefined) context.refuseChecks(refused);
    }
  }
  if (refusal !== null) throw refusal;
}

/**
 * The error graphql will raise for a check field's argument as it runs, if
 * any: only a variable declared nullable with a default and sent as an
 * explicit null can make one (every other argument was refused before
 * anything ran), so an operation without such a variable costs nothing more.
 */
function refusedArgumentOf(info: Pick<GraphQLResolveInfo, "operation" | "fragments" | "variableValues" | "parentType">): unknown {
  const definitions = info.operation.variableDefinitions;
  const nulled = definitions?.some(
    (definition) => definition.defaultValue !== undefined && definition.type.kind !== Kind.NON_NULL_TYPE && info.variableValues[definition.variable.name.value] === null,
  );
  if (!nulled) return undefined;
  const fields = info.parentType.getFields();
  for (const field of rootFields(info.operation, info.fragments)) {
    const definition = fields[field.name.value];
    if (definition === undefined || !(field.name.value === "checkLimits" || field.name.value === "checkLimitsBatch")) continue;
    try {
      getArgumentValues(definition, field, info.variableValues);
    } catch (error) {
      return error;
    }
  }
  return undefined;
}

function fieldChecks(field: FieldNode, operation: OperationDefinitionNode, variables: Readonly<Record<string, unknown>> | undefined): number {
  if (field.name.value === "checkLimits") return 1;
  if (field.name.value !== "checkLimitsBatch") return 0;
  const requests = field.arguments?.find((argument) => argument.name.value === "requests")?.value;
  if (requests?.kind !== Kind.VARIABLE) return literalLength(requests);
  const name = requests.name.value;
  const value = variables !== undefined && Object.hasOwn(variables, name) ? variables[name] : undefined;
  if (value === undefined) return literalLength(operation.variableDefinitions?.find((definition) => definition.variable.name.value === name)?.defaultValue);
  if (Array.isArray(value)) return value.length;
  // A single input where a list is expected is coerced to a list of one.
  return value === null ? 0 : 1;
}

/** How many entries a list argument written in the document has (a single value is a list of one). */
function literalLength(value: ValueNode | undefined): number {
  if (value === undefined || value.kind === Kind.NULL) return 0;
  return value.kind === Kind.LIST ? value.values.length : 1;
}
