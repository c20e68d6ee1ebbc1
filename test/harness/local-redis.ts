/**
 * Redis processes of a test's own, on spare loopback ports: a Redis Cluster
 * (masters with replicas, joined by redis-cli --cluster create) or a Sentinel
 * group (a master, a replica and a sentinel). Tests can kill their nodes;
 * stop() kills every process by its pid and removes the temporary directory,
 * and a process that exits without stopping kills what it started.
 *
 * Every node runs without persistence, with diskless replication that starts
 * at once, and with a short node timeout, so that a cluster is up in about two
 * seconds and a killed master is replaced in about two more.
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { freePort } from "./free-port.js";

export interface HostPort {
  host: string;
  port: number;
}

const HOST = "127.0.0.1";

/** TLS for a group's nodes: PEM files of the server certificate, its key, and the CA that signed it. */
export interface NodeTls {
  cert: string;
  key: string;
  ca: string;
}

/** What a connection to a group's nodes takes: their requirepass, and TLS when they speak only that. */
interface NodeAccess {
  password: string | null;
  tls: NodeTls | null;
}

const OPEN: NodeAccess = { password: null, tls: null };
/** Redis Cluster talks between nodes on the client port + 10000. */
const BUS_OFFSET = 10_000;
const run = promisify(execFile);

/** Groups started here and not yet stopped: killed if the test process exits without stopping them. */
const running = new Set<Processes>();
process.once("exit", () => {
  for (const processes of running) processes.killNow();
});

class Processes {
  readonly dir = mkdtempSync(join(tmpdir(), "floodgate-redis-"));
  private readonly children = new Map<number, ChildProcess>();

  /** `access`: what this group's own connections to its nodes take. */
  constructor(readonly access: NodeAccess = OPEN) {
    running.add(this);
  }

  /** Starts a node, serving TLS only when the group's access says so; `access` is what pinging it takes (the group's by default). */
  async start(port: number, args: string[], access: NodeAccess = this.access): Promise<void> {
    const { tls } = this.access;
    const listen = tls
      ? ["--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key, "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", "no"]
      : ["--port", String(port)];
    const child = spawn("redis-server", [...args, ...listen, "--bind", HOST, "--dir", this.dir, "--save", "", "--appendonly", "no", "--logfile", this.log(port)], {
      stdio: "ignore",
    });
    this.children.set(port, child);
    await waitFor(
      `redis-server on port ${port}`,
      async () => (await command(port, (r) => r.ping(), access)) === "PONG",
      () => (child.exitCode === null ? null : new Error(`redis-server on port ${port} exited: ${this.tail(port)}`)),
    );
  }

  /** Kills one node at once (SIGKILL: no goodbye to the cluster), as a crash would. */
  kill(port: number): void {
    this.children.get(port)?.kill("SIGKILL");
  }

  async stop(): Promise<void> {
    const exits = [...this.children.values()]
      .filter((child) => child.exitCode === null && child.signalCode === null)
      .map((child) => new Promise((resolve) => child.once("exit", resolve)));
    this.killNow();
    await Promise.all(exits);
  }

  /** Synchronous, for process exit: SIGKILL every node, remove the directory. */
  killNow(): void {
    for (const child of this.children.values()) child.kill("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
    running.delete(this);
  }

  private log(port: number): string {
    return join(this.dir, `${port}.log`);
  }

  private tail(port: number): string {
    try {
      return readFileSync(this.log(port), "utf8").trim().split("\n").slice(-3).join(" | ");
    } catch {
      return "(no log)";
    }
  }
}

export interface LocalRedisCluster {
  /** Every node: seeds for a client. */
  nodes: HostPort[];
  /** The master serving a slot now, by asking the cluster. */
  masterOf(slot: number): Promise<HostPort>;
  kill(node: HostPort): void;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long a master may be silent before its replica takes over. */
  nodeTimeoutMs?: number;
  /** requirepass (and masterauth) of every node; none by default. */
  password?: string;
  /** TLS only, between the nodes too (tls-cluster, tls-replication); plain TCP by default. */
  tls?: NodeTls;
  /** cluster-require-full-coverage: whether every master refuses commands while some slot has none (Redis's default, yes). */
  requireFullCoverage?: boolean;
}

export function startRedisCluster(options: ClusterOptions = {}): Promise<LocalRedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 1;
  const access: NodeAccess = { password: options.password ?? null, tls: options.tls ?? null };
  const { password } = access;
  return withProcesses(access, async (processes) => {
    const ports = await sparePorts(masters * (1 + replicas), BUS_OFFSET);
    const args = (port: number) => [
      "--cluster-enabled", "yes",
      "--cluster-config-file", join(processes.dir, `nodes-${port}.conf`),
      // A lone master never learns its own address from a peer: announce it.
      "--cluster-announce-ip", HOST,
      "--cluster-node-timeout", String(options.nodeTimeoutMs ?? 1000),
      // A replica may always take over, however long its master was silent.
      "--cluster-replica-validity-factor", "0",
      "--repl-diskless-sync", "yes",
      "--repl-diskless-sync-delay", "0",
      "--cluster-require-full-coverage", options.requireFullCoverage === false ? "no" : "yes",
      ...(password === null ? [] : ["--requirepass", password, "--masterauth", password]),
      ...(access.tls === null ? [] : ["--tls-cluster", "yes", "--tls-replication", "yes"]),
    ];
    await Promise.all(ports.map((port) => processes.start(port, args(port))));
    const addresses = ports.map((port) => `${HOST}:${port}`);
    if (masters === 1 && replicas === 0) {
      await redisCli(["-p", String(ports[0]), "cluster", "addslotsrange", "0", "16383"], access);
    } else {
      await redisCli(["--cluster", "create", ...addresses, "--cluster-replicas", String(replicas), "--cluster-yes"], access);
    }
    await waitFor("cluster_state:ok on every node, replicas in sync", () => clusterReady(ports, masters * replicas, access));
    const nodes = ports.map((port) => ({ host: HOST, port }));
    return {
      nodes,
      masterOf: async (slot) => {
        for (const node of nodes) {
          const reply = await command(node.port, (redis) => redis.call("CLUSTER", "SLOTS") as Promise<[number, number, [string, number]][]>, access).catch(() => null);
          const range = reply?.find(([from, to]) => from <= slot && slot <= to);
          if (range) return { host: range[2][0], port: range[2][1] };
        }
        throw new Error(`no live node knows who serves slot ${slot}`);
      },
      kill: (node) => processes.kill(node.port),
      stop: () => processes.stop(),
    };
  });
}

export interface LocalRedisSentinel {
  sentinels: HostPort[];
  masterName: string;
  master: HostPort;
  /** Asks the sentinel to promote the replica; resolves once it reports the new master. */
  failover(): Promise<HostPort>;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  /** requirepass (and masterauth) of the master and the replica; none by default. */
  password?: string;
  /** The sentinel's own requirepass; none by default. */
  sentinelPassword?: string;
}

/** A master, one replica and one sentinel (quorum 1) watching them. */
export function startRedisSentinel(options: SentinelOptions = {}): Promise<LocalRedisSentinel> {
  const masterName = "floodgate";
  const password = options.password ?? null;
  const sentinelPassword = options.sentinelPassword ?? null;
  const access: NodeAccess = { password, tls: null };
  return withProcesses(access, async (processes) => {
    const [master, replica, sentinel] = (await sparePorts(3, 0)) as [number, number, number];
    const replication = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", ...(password === null ? [] : ["--requirepass", password, "--masterauth", password])];
    await processes.start(master, replication);
    await processes.start(replica, [...replication, "--replicaof", HOST, String(master)]);
    // A sentinel learns of replicas from the master's INFO, which it reads on
    // connecting and then every 10 s: start it once the replica is in sync.
    await waitFor("the replica to sync", async () => (await command(replica, (r) => r.info("replication"), access)).includes("master_link_status:up"));
    const config = join(processes.dir, "sentinel.conf");
    writeFileSync(
      config,
      [
        `sentinel monitor ${masterName} ${HOST} ${master} 1`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
        `sentinel failover-timeout ${masterName} 5000`,
        ...(password === null ? [] : [`sentinel auth-pass ${masterName} ${password}`]),
        ...(sentinelPassword === null ? [] : [`requirepass ${sentinelPassword}`]),
        "",
      ].join("\n"),
    );
    const sentinelAccess: NodeAccess = { password: sentinelPassword, tls: null };
    const toSentinel = <T>(body: (redis: Redis) => Promise<T>) => command(sentinel, body, sentinelAccess);
    await processes.start(sentinel, [config, "--sentinel"], sentinelAccess);
    const current = async (): Promise<HostPort> => {
      const [host, port] = (await toSentinel((r) => r.call("SENTINEL", "get-master-addr-by-name", masterName))) as [string, string];
      return { host, port: Number(port) };
    };
    await waitFor("the sentinel to see the replica in sync", async () => {
      const known = (await toSentinel((r) => r.call("SENTINEL", "replicas", masterName))) as string[][];
      const fields = new Map(known[0]?.flatMap((value, i, all) => (i % 2 === 0 ? [[value, all[i + 1]] as const] : [])));
      return fields.get("flags") === "slave" && fields.get("master-link-status") === "ok";
    });
    return {
      sentinels: [{ host: HOST, port: sentinel }],
      masterName,
      master: { host: HOST, port: master },
      failover: async () => {
        const before = await current();
        await toSentinel((r) => r.call("SENTINEL", "failover", masterName));
        let after = before;
        await waitFor("the sentinel to report the promoted replica", async () => {
          after = await current();
          return after.port !== before.port;
        });
        return after;
      },
      stop: () => processes.stop(),
    };
  });
}

/** Starts what `start` starts in a new group of processes (whose nodes take `access`); if it fails, they are stopped. */
async function withProcesses<T>(access: NodeAccess, start: (processes: Processes) => Promise<T>): Promise<T> {
  const processes = new Processes(access);
  try {
    return await start(processes);
  } catch (error) {
    await processes.stop();
    throw error;
  }
}

async function clusterReady(ports: readonly number[], replicas: number, access: NodeAccess): Promise<boolean> {
  let inSync = 0;
  for (const port of ports) {
    const [cluster, replication] = await command(port, (r) => Promise.all([r.call("CLUSTER", "INFO") as Promise<string>, r.info("replication")]), access);
    if (!cluster.includes("cluster_state:ok")) return false;
    if (replication.includes("master_link_status:up")) inSync++;
  }
  return inSync === replicas;
}

/** `count` free loopback ports; with an offset, each port + offset is free as well (the cluster bus). */
/**
 * `count` ports free now; with an offset, their port + offset is free too.
 *
 * A cluster's ports are drawn below the OS's ephemeral range, bus port
 * included: the kernel hands ephemeral ports to every outgoing connection and
 * every `freePort()` of tests running alongside, so a bus port probed free
 * there could be taken before redis-server binds it.
 */
async function sparePorts(count: number, offset: number): Promise<number[]> {
  const ports: number[] = [];
  const band = offset > 0 ? ephemeralLowest() - offset - LOWEST_UNPRIVILEGED : 0;
  while (ports.length < count) {
    // A machine whose ephemeral range leaves no room below it gets the OS's pick.
    const port = band > 1_000 ? await probed(LOWEST_UNPRIVILEGED + Math.floor(Math.random() * band)) : await freePort();
    if (port === null || ports.includes(port)) continue;
    if (offset > 0 && (await probed(port + offset)) === null) continue;
    ports.push(port);
  }
  return ports;
}

const LOWEST_UNPRIVILEGED = 1024;

/** The first port of the range the OS picks ephemeral ports from (Linux's default where it cannot be read). */
function ephemeralLowest(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
}

function probed(port: number): Promise<number | null> {
  return freePort(port).catch(() => null);
}

async function redisCli(args: string[], { password, tls }: NodeAccess): Promise<void> {
  const auth = password === null ? [] : ["-a", password, "--no-auth-warning"];
  const secure = tls === null ? [] : ["--tls", "--cacert", tls.ca];
  await run("redis-cli", ["-h", HOST, ...auth, ...secure, ...args], { timeout: 30_000 });
}

async function command<T>(port: number, body: (redis: Redis) => Promise<T>, { password, tls }: NodeAccess): Promise<T> {
  const redis = new Redis({
    host: HOST,
    port,
    ...(password === null ? {} : { password }),
    ...(tls === null ? {} : { tls: { ca: readFileSync(tls.ca) } }),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1_000,
  });
  redis.on("error", () => undefined); // the command's promise carries the error
  try {
    await redis.connect();
    return await body(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * Polls until `ready` says so (20 ms apart; an error means "not yet"), for at
 * most 30 s; `failed` says when waiting longer is pointless.
 */
async function waitFor(what: string, ready: () => Promise<boolean>, failed: () => Error | null = () => null): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (await ready().catch(() => false)) return;
    const error = failed() ?? (Date.now() > deadline ? new Error(`timed out waiting for ${what}`) : null);
    if (error) throw error;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
