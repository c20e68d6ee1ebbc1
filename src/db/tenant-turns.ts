/**
 * Writers of one tenant in this process, taking turns in memory before they
 * take a database connection. A rule creation or an access list addition
 * waits for its tenant's advisory lock inside its transaction (the quotas are
 * exact across instances that way), holding a pooled connection the whole
 * time. A burst of writers of one tenant then held every connection of the
 * pool while waiting for each other, and the last ones timed out waiting for
 * a connection (the pool's 2 s), failing as if the database were unreachable:
 * 40 creations from two instances on a loaded machine. Taking turns here
 * first, at most one transaction per tenant and process waits on the lock,
 * and the others wait without a connection.
 */
const ended = (): void => undefined;

export class TenantTurns {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `write` once every earlier write of these tenants in this process has ended, however it ended. */
  run<T>(tenantIds: Iterable<string>, write: () => Promise<T>): Promise<T> {
    const tenants = [...new Set(tenantIds)];
    const earlier = tenants.map((tenantId) => this.tails.get(tenantId)).filter((tail) => tail !== undefined);
    // Each write waits only for writes queued before it, so turns never wait for each other in a circle.
    const mine = earlier.length === 0 ? write() : Promise.all(earlier).then(write);
    const tail = mine.then(ended, ended);
    for (const tenantId of tenants) this.tails.set(tenantId, tail);
    void tail.then(() => {
      for (const tenantId of tenants) if (this.tails.get(tenantId) === tail) this.tails.delete(tenantId);
    });
    return mine;
  }
}
