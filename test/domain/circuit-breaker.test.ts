import { describe, expect, it } from "vitest";
import { CircuitBreaker, type BreakerState } from "../../src/domain/circuit-breaker.js";
import { ManualClock } from "../support/clock.js";

function breaker(clock = new ManualClock()) {
  const changes: BreakerState[] = [];
  const subject = new CircuitBreaker({ failureThreshold: 3, openMs: 1000, clock, onStateChange: (s) => changes.push(s) });
  return { subject, clock, changes };
}

describe("CircuitBreaker", () => {
  it("stays closed below the threshold of consecutive failures", () => {
    const { subject } = breaker();
    subject.failed();
    subject.failed();
    subject.succeeded();
    subject.failed();
    subject.failed();
    expect(subject.state).toBe("closed");
    expect(subject.allows()).toBe(true);
  });

  it("opens at the threshold and refuses calls until the open time has passed", () => {
    const { subject, clock } = breaker();
    for (let i = 0; i < 3; i++) subject.failed();
    expect(subject.state).toBe("open");
    expect(subject.allows()).toBe(false);
    clock.advance(999);
    expect(subject.allows()).toBe(false);
    expect(subject.retryAtMs).toBe(clock.now() + 1);
  });

  it("lets exactly one trial call through once the open time has passed", () => {
    const { subject, clock } = breaker();
    for (let i = 0; i < 3; i++) subject.failed();
    clock.advance(1000);
    expect(subject.allows()).toBe(true);
    expect(subject.state).toBe("half-open");
    expect(subject.allows()).toBe(false);
  });

  it("closes when the trial succeeds", () => {
    const { subject, clock, changes } = breaker();
    for (let i = 0; i < 3; i++) subject.failed();
    clock.advance(1000);
    subject.allows();
    subject.succeeded();
    expect(subject.state).toBe("closed");
    expect(subject.allows()).toBe(true);
    expect(changes).toEqual(["open", "half-open", "closed"]);
  });

  it("opens again for a full open time when the trial fails", () => {
    const { subject, clock } = breaker();
    for (let i = 0; i < 3; i++) subject.failed();
    clock.advance(1000);
    subject.allows();
    subject.failed();
    expect(subject.state).toBe("open");
    clock.advance(999);
    expect(subject.allows()).toBe(false);
    clock.advance(1);
    expect(subject.allows()).toBe(true);
  });

  it("says whether it would let a call through without taking the half-open trial", () => {
    const { subject, clock, changes } = breaker();
    expect(subject.wouldAllow()).toBe(true);
    for (let i = 0; i < 3; i++) subject.failed();
    expect(subject.wouldAllow()).toBe(false);
    clock.advance(1000);
    expect(subject.wouldAllow()).toBe(true);
    expect(subject.wouldAllow()).toBe(true);
    expect(subject.state).toBe("open");
    expect(subject.allows()).toBe(true);
    expect(subject.wouldAllow()).toBe(false);
    expect(changes).toEqual(["open", "half-open"]);
  });
});
