/**
 * A clean install on every Node the project declares: no installed package
 * may ask for a Node that package.json's engines admits and it does not (npm
 * prints an EBADENGINE warning for each).
 *
 * Several dependencies dropped Node 20 in versions that changed nothing else,
 * or nothing this project uses; package.json's overrides keep the last
 * versions that run on it:
 *   @whatwg-node/promise-helpers 1.3.2, @whatwg-node/disposablestack 0.0.6
 *     (2.0.0 and 0.1.0 changed only their engines, and promise-helpers
 *     dropped a deprecated function), @whatwg-node/fetch 0.10.13 (0.12 only
 *     dropped an export), under Apollo Server and GraphQL Code Generator's
 *     loaders;
 *   sync-fetch 0.6.0 and listr2 9.0.5 (the next ones: new engines, ESM only)
 *     under GraphQL Code Generator;
 *   light-my-request 6.6.0 (its cookie 2 needs Node 22), fastify's inject;
 *   @prisma/dev 0.20.0, the server of `prisma dev` (later versions depend on
 *     @prisma/streams-local, which needs Node 22), offering what the Prisma
 *     CLI asks of it; the project runs no `prisma dev`.
 */

import { readFileSync } from "node:fs";
import semver from "semver";
import { describe, expect, it } from "vitest";

interface LockedPackage {
  version?: string;
  engines?: { node?: string } | string[];
}

const lock = JSON.parse(readFileSync(new URL("../../package-lock.json", import.meta.url), "utf8")) as { packages: Record<string, LockedPackage> };
const project = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { engines: { node: string } };

describe("package-lock.json", () => {
  it("holds no package whose engines.node leaves out a Node that package.json admits", () => {
    const declared = project.engines.node;
    const refusing = Object.entries(lock.packages)
      .filter(([path]) => path !== "")
      .flatMap(([path, pkg]) => {
        const wanted = Array.isArray(pkg.engines) ? undefined : pkg.engines?.node;
        return wanted !== undefined && !semver.subset(declared, wanted) ? [`${path}@${pkg.version} wants node ${wanted}`] : [];
      });
    expect(refusing).toEqual([]);
  });

  it("admits the Node the project is tested on", () => {
    expect(semver.satisfies(process.versions.node, project.engines.node)).toBe(true);
  });

  it("matches package.json's engines", () => {
    expect((lock.packages[""]!.engines as { node: string }).node).toBe(project.engines.node);
  });
});
