import { describe, expect, it } from "vitest";
import { compileConditions } from "../../src/domain/attributes.js";
import { parseCheckRequest } from "../../src/domain/request.js";
import { validationErrorOf } from "../support/validation-error.js";

function attributesOf(attributes: unknown): Map<string, string> {
  return new Map(parseCheckRequest({ tenantId: "acme", attributes: attributes as { key: string; value: string }[] }).attributes);
}

describe("a check's attributes", () => {
  it("are read into a map by key", () => {
    expect(attributesOf([{ key: "plan", value: "free" }, { key: "route_group", value: "search|v2" }])).toEqual(
      new Map([
        ["plan", "free"],
        ["route_group", "search|v2"],
      ]),
    );
  });

  it("are none when absent, null or empty", () => {
    for (const none of [undefined, null, []]) expect(attributesOf(none).size).toBe(0);
  });

  it.each([
    [[{ key: "plan", value: "a" }, { key: "plan", value: "b" }], "request.attributes[1].key", 'request.attributes[1].key names "plan" a second time'],
    [[{ key: "plan:x", value: "a" }], "request.attributes[0].key", 'request.attributes[0].key must be letters, digits, "_", "-" and "." only (got "plan:x")'],
    [[{ key: "", value: "a" }], "request.attributes[0].key", "request.attributes[0].key must be 1 to 64 characters (got 0)"],
    [[{ key: "plan", value: "" }], "request.attributes[0].value", "request.attributes[0].value must not be empty (leave the attribute out instead)"],
    [[{ key: "plan", value: "v".repeat(257) }], "request.attributes[0].value", "request.attributes[0].value must be at most 256 characters (got 257)"],
    [[{ key: "plan", value: "free\nx" }], "request.attributes[0].value", "request.attributes[0].value must not contain control characters"],
    [Array.from({ length: 17 }, (_, i) => ({ key: `k${i}`, value: "v" })), "request.attributes", "request.attributes must hold at most 16 attributes (got 17)"],
  ])("refuses %j, naming %s", (attributes, field, message) => {
    const error = validationErrorOf(() => attributesOf(attributes));
    expect(error.field).toBe(field);
    expect(error.message).toBe(message);
  });

  it("are named in a batch by the check's index", () => {
    const error = validationErrorOf(() => parseCheckRequest({ tenantId: "acme", attributes: [{ key: "a b", value: "x" }] }, "requests[3]"));
    expect(error.field).toBe("requests[3].attributes[0].key");
  });

  it("take 16 attributes, keys of 64 characters and values of 256", () => {
    const many = Array.from({ length: 16 }, (_, i) => ({ key: `${"k".repeat(62)}${String(i).padStart(2, "0")}`, value: "v".repeat(256) }));
    expect(attributesOf(many).size).toBe(16);
  });
});

describe("a rule's conditions on attributes", () => {
  const when = compileConditions([
    { key: "plan", values: ["free", "trial"] },
    { key: "region", values: ["eu"] },
  ])!;

  it("hold when every key carries one of its values", () => {
    expect(when(new Map([["plan", "trial"], ["region", "eu"], ["other", "x"]]))).toBe(true);
  });

  it("do not hold when a value is another", () => {
    expect(when(new Map([["plan", "pro"], ["region", "eu"]]))).toBe(false);
  });

  it("do not hold when an attribute is absent: the rule does not apply", () => {
    expect(when(new Map([["plan", "free"]]))).toBe(false);
  });

  it("are no test at all when there are none", () => {
    expect(compileConditions([])).toBeNull();
  });
});
