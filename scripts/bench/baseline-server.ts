/**
 * The baseline of `npm run bench`: the decision endpoint a team without
 * Floodgate would put in front of Redis, built on rate-limiter-flexible's
 * RateLimiterRedis with the bench's three rules (per user, per IP, per
 * endpoint), all three consumed for every check. Like Floodgate it answers
 * allowed or denied, the wait, and the X-RateLimit-* headers of the most
 * restrictive rule. It is not atomic: a check refused by one rule still
 * counts against the other two (rate-limiter-flexible has no all-or-nothing
 * across limiters).
 *
 *   POST /check {"userId","ip","method","resource"}  ->  {"allowed","retryAfter","headers"}
 *
 * Environment: PORT, REDIS_URL, KEY_PREFIX. Same ioredis settings as
 * Floodgate (no auto-pipelining), so both get the same client; measured for
 * the baseline itself, auto-pipelining made about the same decisions/s with
 * about twice the p99 (BENCHMARKS.md, "The Redis client").
 */

import { createServer, type IncomingMessage } from "node:http";
import { Redis } from "ioredis";
import { RateLimiterRes } from "rate-limiter-flexible";
import { baselineRules } from "./baseline-rules.js";
import type { Caller } from "./workload.js";

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { enableAutoPipelining: false, maxRetriesPerRequest: 2 });
const RULES = baselineRules(redis, process.env.KEY_PREFIX ?? "rlf-bench:");

interface Verdict {
  allowed: boolean;
  limit: number;
  res: RateLimiterRes;
}

async function decide(caller: Caller) {
  const settled = await Promise.allSettled(RULES.map((rule) => rule.limiter.consume(rule.keyOf(caller))));
  const verdicts: Verdict[] = settled.map((s, i) => {
    const res = s.status === "fulfilled" ? s.value : s.reason;
    // A rejection that is not a RateLimiterRes is a Redis failure, not a refusal.
    if (!(res instanceof RateLimiterRes)) throw res;
    return { allowed: s.status === "fulfilled", limit: RULES[i]!.limiter.points, res };
  });
  const allowed = verdicts.every((v) => v.allowed);
  const deciding = allowed
    ? verdicts.reduce((a, b) => (b.res.remainingPoints < a.res.remainingPoints ? b : a))
    : verdicts.filter((v) => !v.allowed).reduce((a, b) => (b.res.msBeforeNext > a.res.msBeforeNext ? b : a));
  const retryAfter = allowed ? null : Math.ceil(deciding.res.msBeforeNext / 1000);
  const headers = [
    { name: "X-RateLimit-Limit", value: String(deciding.limit) },
    { name: "X-RateLimit-Remaining", value: String(deciding.res.remainingPoints) },
    { name: "X-RateLimit-Reset", value: String(Math.ceil((Date.now() + deciding.res.msBeforeNext) / 1000)) },
  ];
  if (retryAfter !== null) headers.push({ name: "Retry-After", value: String(retryAfter) });
  return { allowed, retryAfter, headers };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/readyz") {
    res.writeHead(redis.status === "ready" ? 200 : 503).end();
    return;
  }
  readBody(req)
    .then((body) => decide(JSON.parse(body) as Caller))
    .then((decision) => {
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(decision));
    })
    .catch((error: unknown) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(error));
    });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 4100), "127.0.0.1");

process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  redis.disconnect();
});
