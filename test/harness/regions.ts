/**
 * Regions on this machine: each a redis-server of its own and instances of
 * the service deciding on it (in this process, or as `startInstance` starts
 * them: npm run regions runs each as a process of its own), all on one
 * Postgres database (rules are shared). Each region's Redis is reached from the other regions
 * through a TCP proxy, so that cut() partitions every region from every other
 * (each keeps its own Redis) and heal() joins them again.
 */

import { startInProcessApp, testAdminToken, type TestApp } from "./in-process-app.js";
import { startOwnRedis, type OwnRedis } from "./redis-server.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

export interface Region<I> {
  name: string;
  redis: OwnRedis;
  /** The other regions' way to this region's Redis. */
  proxy: TcpProxy;
  instances: I[];
}

export interface Regions<I = TestApp> {
  regions: Region<I>[];
  adminToken: string;
  /** Every link between regions dropped, and refused until heal(). */
  cut(): Promise<void>;
  heal(): Promise<void>;
  stop(): Promise<void>;
}

export interface RegionsOptions<I> {
  names: readonly string[];
  instancesPerRegion: number;
  databaseUrl: string;
  env?: Record<string, string>;
  /** Starts one instance with these settings; default: in this process. */
  startInstance?: (env: Record<string, string>) => Promise<I>;
}

export function startRegions(options: RegionsOptions<TestApp> & { startInstance?: undefined }): Promise<Regions<TestApp>>;
export function startRegions<I extends { stop(): Promise<void> }>(options: RegionsOptions<I> & { startInstance: (env: Record<string, string>) => Promise<I> }): Promise<Regions<I>>;
export async function startRegions<I extends { stop(): Promise<void> }>(options: RegionsOptions<I>): Promise<Regions<I>> {
  const start = options.startInstance ?? ((env: Record<string, string>) => startInProcessApp(env) as unknown as Promise<I>);
  const adminToken = testAdminToken();
  const regions: Region<I>[] = [];
  const stop = async () => {
    for (const region of regions) {
      for (const instance of region.instances.splice(0)) await instance.stop();
    }
    for (const region of regions) {
      await region.proxy.stop();
      await region.redis.stop();
    }
  };
  try {
    for (const name of options.names) {
      const redis = await startOwnRedis();
      regions.push({ name, redis, proxy: await startTcpProxy("127.0.0.1", redis.port), instances: [] });
    }
    for (const region of regions) {
      const peers = regions.filter((other) => other !== region).map((other) => `${other.name}=redis://127.0.0.1:${other.proxy.port}`);
      for (let i = 0; i < options.instancesPerRegion; i++) {
        region.instances.push(
          await start({
            ADMIN_TOKEN: adminToken,
            DATABASE_URL: options.databaseUrl,
            REDIS_URL: region.redis.url,
            REDIS_KEY_PREFIX: "fgregions:",
            REGION: region.name,
            REGION_PEERS: peers.join(","),
            ...options.env,
          }),
        );
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    regions,
    adminToken,
    cut: async () => {
      for (const region of regions) await region.proxy.stop();
    },
    heal: async () => {
      for (const region of regions) await region.proxy.start();
    },
    stop,
  };
}
