#!/usr/bin/env node
// Generates the Prisma client (runs on npm install). `prisma generate` first
// tries to download the native schema engine, which it does not need for
// generating and which machines without internet cannot fetch; pointing
// PRISMA_SCHEMA_ENGINE_BINARY at any existing file skips that download. With
// internet, or with the variable already set, it changes nothing.
import { spawnSync } from "node:child_process";

const env = { ...process.env, CHECKPOINT_DISABLE: "1" };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;
const result = spawnSync("prisma", ["generate"], { stdio: "inherit", env, shell: process.platform === "win32" });
process.exit(result.status ?? 1);
