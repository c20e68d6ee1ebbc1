-- Access lists: per tenant ("*" for every tenant), identifiers always refused (DENY) or always let through (ALLOW).
-- value is canonical (src/domain/access-list.ts), so one identifier is one row; an expired row is as if it did
-- not exist, and is replaced by an addition of the same identifier. Every addition and removal is
-- recorded in access_list_changes, in the same transaction; that table has no foreign key, so a removed entry keeps its history.
-- CreateEnum
CREATE TYPE "AccessList" AS ENUM ('DENY', 'ALLOW');

-- CreateEnum
CREATE TYPE "ListEntryKind" AS ENUM ('IP', 'USER', 'API_KEY', 'USER_AGENT');

-- CreateEnum
CREATE TYPE "ListEntryChangeKind" AS ENUM ('ADDED', 'REMOVED');

-- CreateTable
CREATE TABLE "access_list_entries" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "list" "AccessList" NOT NULL,
    "kind" "ListEntryKind" NOT NULL,
    "value" TEXT NOT NULL,
    "note" TEXT,
    "expires_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "created_by" TEXT NOT NULL,

    CONSTRAINT "access_list_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "access_list_changes" (
    "seq" SERIAL NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "entry_id" TEXT NOT NULL,
    "kind" "ListEntryChangeKind" NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL,
    "actor" TEXT,
    "entry" JSONB NOT NULL,

    CONSTRAINT "access_list_changes_pkey" PRIMARY KEY ("seq")
);

-- CreateIndex
CREATE UNIQUE INDEX "access_list_entries_tenant_id_list_kind_value_key" ON "access_list_entries"("tenant_id", "list", "kind", "value");

-- CreateIndex
CREATE INDEX "access_list_changes_tenant_id_seq_idx" ON "access_list_changes"("tenant_id", "seq");
