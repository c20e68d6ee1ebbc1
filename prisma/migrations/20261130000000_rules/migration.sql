-- CreateEnum
CREATE TYPE "Dimension" AS ENUM ('TENANT', 'USER', 'IP', 'API_KEY', 'CLIENT', 'ENDPOINT');

-- CreateEnum
CREATE TYPE "Algorithm" AS ENUM ('SLIDING_WINDOW_COUNTER', 'TOKEN_BUCKET', 'FIXED_WINDOW', 'SLIDING_WINDOW_LOG', 'LEAKY_BUCKET');

-- CreateEnum
CREATE TYPE "Action" AS ENUM ('REJECT', 'THROTTLE', 'LOG_ONLY');

-- CreateEnum
CREATE TYPE "FailureMode" AS ENUM ('OPEN', 'CLOSED', 'LOCAL');

-- CreateEnum
CREATE TYPE "WindowUnit" AS ENUM ('SECONDS', 'MINUTES', 'HOURS', 'DAYS');

-- CreateTable
CREATE TABLE "rules" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "scope" "Dimension"[],
    "resource" TEXT,
    "method" TEXT,
    "algorithm" "Algorithm" NOT NULL,
    "limit" INTEGER NOT NULL,
    "window" INTEGER NOT NULL,
    "window_unit" "WindowUnit" NOT NULL,
    "burst" INTEGER,
    "action" "Action" NOT NULL,
    "failure_mode" "FailureMode" NOT NULL,
    "priority" INTEGER NOT NULL,
    "enabled" BOOLEAN NOT NULL,
    "version" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "rules_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "rules_tenant_id_name_key" ON "rules"("tenant_id", "name");

-- CreateIndex
CREATE INDEX "rules_updated_at_idx" ON "rules"("updated_at");
