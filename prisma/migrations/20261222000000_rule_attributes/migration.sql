-- A rule's attributes: the attribute keys its buckets are keyed by (after the scope's dimensions), and the
-- attribute values a request must carry for it to apply. Existing rules have neither: their buckets and matches stay as they were.
-- AlterTable
ALTER TABLE "rules" ADD COLUMN "attribute_keys" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
ADD COLUMN "attribute_conditions" JSONB NOT NULL DEFAULT '[]';
