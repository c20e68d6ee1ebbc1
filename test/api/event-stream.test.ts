/** A subscriber's stream: filtered before buffering, bounded, and ended with SUBSCRIBER_TOO_SLOW when its reader falls too far behind. */

import { GraphQLError } from "graphql";
import { describe, expect, it } from "vitest";
import { eventBusPubSub, Topic } from "../../src/api/event-pubsub.js";
import { SUBSCRIBER_BUFFER } from "../../src/domain/service-limits.js";
import { eventStream } from "../../src/api/event-stream.js";
import type { ThrottleEvent } from "../../src/domain/events.js";
import type { Unsubscribe } from "../../src/domain/ports.js";
import { noTelemetry } from "../../src/domain/telemetry.js";
import { InProcessEventBus } from "../../src/store/memory/in-process-event-bus.js";

function source() {
  let push: (n: number) => void = () => {};
  let subscribed = false;
  const subscribe = (p: (n: number) => void): Unsubscribe => {
    push = p;
    subscribed = true;
    return () => {
      subscribed = false;
    };
  };
  return { subscribe, push: (n: number) => push(n), isSubscribed: () => subscribed };
}

const overflow = () => new Error("too slow");

describe("eventStream", () => {
  it("hands events to a waiting reader and buffers them for a busy one, in order", async () => {
    const s = source();
    const stream = eventStream(s.subscribe, { capacity: 3, overflow });
    const first = stream.next();
    s.push(1);
    s.push(2);
    s.push(3);
    expect(await first).toEqual({ value: 1, done: false });
    expect(await stream.next()).toEqual({ value: 2, done: false });
    expect(await stream.next()).toEqual({ value: 3, done: false });
  });

  it("ends with the overflow error once more than `capacity` events wait, and stops listening", async () => {
    const s = source();
    const stream = eventStream(s.subscribe, { capacity: 3, overflow });
    for (let n = 1; n <= 4; n++) s.push(n);
    expect(s.isSubscribed()).toBe(false);
    await expect(stream.next()).rejects.toThrow("too slow");
    expect(await stream.next()).toEqual({ value: undefined, done: true });
  });

  it("stops listening when the reader returns", async () => {
    const s = source();
    const stream = eventStream(s.subscribe, { capacity: 3, overflow });
    await stream.return!();
    expect(s.isSubscribed()).toBe(false);
    expect(await stream.next()).toEqual({ value: undefined, done: true });
  });
});

describe("eventBusPubSub", () => {
  const event = (fields: Partial<ThrottleEvent>): ThrottleEvent => ({
    at: new Date(0),
    tenantId: "acme",
    ruleId: "r1",
    ruleName: "n",
    key: "user:u1",
    resource: null,
    method: null,
    action: "REJECT",
    limit: 1,
    retryAfter: 1,
    shadow: false,
    count: 1,
    ...fields,
  });

  it("queues only what the subscriber's filter wants: other tenants and rules never count against its buffer", async () => {
    const bus = new InProcessEventBus();
    const stream = eventBusPubSub(bus, noTelemetry).subscribe(Topic.THROTTLE_EVENTS, { tenantId: "acme", ruleId: "r1", mayReceive: () => true }) as AsyncIterableIterator<ThrottleEvent>;
    for (let i = 0; i < SUBSCRIBER_BUFFER * 2; i++) {
      bus.publish("throttle", event({ tenantId: "globex" }));
      bus.publish("throttle", event({ ruleId: "r2" }));
    }
    bus.publish("throttle", event({ count: 7 }));
    expect((await stream.next()).value).toMatchObject({ tenantId: "acme", ruleId: "r1", count: 7 });
    await stream.return!();
  });

  it("asks mayReceive with each event's tenant before queueing it: once the subscriber may not receive (its key revoked), nothing is queued", async () => {
    const bus = new InProcessEventBus();
    let revoked = false;
    const asked: string[] = [];
    const mayReceive = (tenantId: string) => {
      asked.push(tenantId);
      return !revoked;
    };
    const stream = eventBusPubSub(bus, noTelemetry).subscribe(Topic.THROTTLE_EVENTS, { mayReceive }) as AsyncIterableIterator<ThrottleEvent>;
    bus.publish("throttle", event({ count: 1 }));
    revoked = true;
    bus.publish("throttle", event({ tenantId: "globex", count: 2 }));
    revoked = false;
    bus.publish("throttle", event({ count: 3 }));
    expect((await stream.next()).value).toMatchObject({ count: 1 });
    expect((await stream.next()).value).toMatchObject({ count: 3 });
    expect(asked).toEqual(["acme", "globex", "acme"]);
    await stream.return!();
  });

  it("ends a subscription that falls SUBSCRIBER_BUFFER events behind with a GraphQL error coded SUBSCRIBER_TOO_SLOW", async () => {
    const bus = new InProcessEventBus();
    const stream = eventBusPubSub(bus, noTelemetry).subscribe(Topic.THROTTLE_EVENTS, { mayReceive: () => true }) as AsyncIterableIterator<ThrottleEvent>;
    for (let i = 0; i <= SUBSCRIBER_BUFFER; i++) bus.publish("throttle", event({}));
    const error = await stream.next().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GraphQLError);
    expect((error as GraphQLError).extensions.code).toBe("SUBSCRIBER_TOO_SLOW");
    expect((error as GraphQLError).message).toBe(
      `this subscription was ended because its reader fell more than ${SUBSCRIBER_BUFFER} events behind; those events and the ones after them were not delivered: subscribe again to carry on`,
    );
  });
});
