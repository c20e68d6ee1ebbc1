/**
 * Which errors Redis answers fail the shard (and count towards its circuit
 * breaker), and which fail only the command's own call: Redis answered, but
 * could not decide that call on its buckets. resilient-counter-store.test.ts
 * shows the second kind, from a real Redis, leaving the breaker closed.
 */

import { ReplyError } from "ioredis";
import { describe, expect, it } from "vitest";
import { failsTheShard } from "../../src/store/redis/redis-counter-store.js";

describe("failsTheShard", () => {
  it("fails only the call for errors about its own buckets or arguments", () => {
    for (const message of [
      "WRONGTYPE Operation against a key holding the wrong kind of value script: floodgate_decide_d5acf3568ef4d248, on @user_function:324.",
      "ERR user_function:689: attempt to compare number with nil script: floodgate_decide_d5acf3568ef4d248, on @user_function:689.",
      "user_function:689: attempt to compare number with nil",
      "user_function:807: decide: malformed rule spec \"x\"",
      "decide_each: decisions and dry runs only",
    ]) {
      expect(failsTheShard(new ReplyError(message)), message).toBe(false);
    }
  });

  it("fails the shard for anything that says Redis itself is failing, and for anything it does not know", () => {
    for (const error of [
      new ReplyError("OOM command not allowed when used memory > 'maxmemory'. script: floodgate_decide_d5acf3568ef4d248, on @user_function:324."),
      new ReplyError("READONLY You can't write against a read only replica. script: floodgate_decide_d5acf3568ef4d248, on @user_function:324."),
      new ReplyError("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."),
      new ReplyError("LOADING Redis is loading the dataset in memory"),
      new ReplyError("CLUSTERDOWN The cluster is down"),
      new ReplyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
      new ReplyError("ERR Error running script, some other failure"),
      new Error("Command timed out"),
      new Error("Connection is closed."),
      new Error("user_function:1: not a reply of Redis"),
      "not even an error",
    ]) {
      expect(failsTheShard(error), String(error)).toBe(true);
    }
  });
});
