import { describe, expect, it } from "vitest";
import { TenantTurns } from "../../src/db/tenant-turns.js";

/** A write that records when it starts and ends, and ends when told. */
function gate(log: string[], name: string) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    write: async () => {
      log.push(`${name} starts`);
      await opened;
      log.push(`${name} ends`);
      return name;
    },
    open: () => open(),
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("TenantTurns", () => {
  it("runs one tenant's writes one after another, in the order they came, and other tenants' meanwhile", async () => {
    const turns = new TenantTurns();
    const log: string[] = [];
    const [a1, a2, b1] = [gate(log, "a1"), gate(log, "a2"), gate(log, "b1")];
    const results = [turns.run(["a"], a1.write), turns.run(["a"], a2.write), turns.run(["b"], b1.write)];
    await settle();
    expect(log).toEqual(["a1 starts", "b1 starts"]);
    a1.open();
    await settle();
    expect(log).toEqual(["a1 starts", "b1 starts", "a1 ends", "a2 starts"]);
    a2.open();
    b1.open();
    expect(await Promise.all(results)).toEqual(["a1", "a2", "b1"]);
  });

  it("goes on after a write that failed, which fails alone", async () => {
    const turns = new TenantTurns();
    const failed = turns.run(["a"], () => Promise.reject(new Error("broken")));
    const next = turns.run(["a"], async () => "next");
    await expect(failed).rejects.toThrow("broken");
    expect(await next).toBe("next");
  });

  it("runs a write of several tenants after the earlier writes of each", async () => {
    const turns = new TenantTurns();
    const log: string[] = [];
    const [a, b, both] = [gate(log, "a"), gate(log, "b"), gate(log, "both")];
    const results = [turns.run(["a"], a.write), turns.run(["b"], b.write), turns.run(["b", "a"], both.write)];
    await settle();
    a.open();
    await settle();
    expect(log).not.toContain("both starts");
    b.open();
    await settle();
    expect(log.at(-1)).toBe("both starts");
    both.open();
    expect(await Promise.all(results)).toEqual(["a", "b", "both"]);
  });
});
