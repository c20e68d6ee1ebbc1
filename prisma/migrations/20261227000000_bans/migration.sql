-- Bans: one value of one dimension of a tenant refused until a time. The unique index makes a tenant's ban of a value one
-- row however many instances ban it at once (they upsert); an ended ban stays until it is replaced or lifted (checks compare
-- until with the time, so no sweeper is needed).
-- CreateTable
CREATE TABLE "bans" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "dimension" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "until" TIMESTAMPTZ(3) NOT NULL,
    "note" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "created_by" TEXT NOT NULL,

    CONSTRAINT "bans_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "bans_tenant_id_dimension_value_key" ON "bans"("tenant_id", "dimension", "value");

-- CreateIndex
CREATE INDEX "bans_until_idx" ON "bans"("until");

-- A rule's automatic ban: { "refusals": K, "withinSeconds": P, "banSeconds": D }; null, as every rule before, bans nobody.
-- AlterTable
ALTER TABLE "rules" ADD COLUMN "auto_ban" JSONB;
