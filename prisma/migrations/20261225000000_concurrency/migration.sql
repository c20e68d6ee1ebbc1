-- CONCURRENCY: a rule limiting the requests in flight (leases held until released or expired, in the counter store).
-- AlterEnum
ALTER TYPE "Algorithm" ADD VALUE 'CONCURRENCY';
