/**
 * A private certificate authority for TLS tests, made with openssl in a
 * temporary directory: a server certificate for localhost and 127.0.0.1, a
 * client certificate, and a second, unrelated CA that trusts neither.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Certificates {
  dir: string;
  /** The CA that signed both certificates (PEM path). */
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A CA that signed neither. */
  otherCa: string;
  remove(): void;
}

export function makeCertificates(): Certificates {
  const dir = mkdtempSync(join(tmpdir(), "floodgate-tls-"));
  const path = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const authority = (name: string) => openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", `/CN=${name}`, "-keyout", path(`${name}.key`), "-out", path(`${name}.crt`));
  const signed = (name: string, extensions: string) => {
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", `/CN=${name}`, "-keyout", path(`${name}.key`), "-out", path(`${name}.csr`));
    writeFileSync(path(`${name}.ext`), `${extensions}\n`);
    openssl("x509", "-req", "-in", path(`${name}.csr`), "-CA", path("ca.crt"), "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2", "-extfile", path(`${name}.ext`), "-out", path(`${name}.crt`));
  };
  authority("ca");
  authority("other-ca");
  signed("server", "subjectAltName=DNS:localhost,IP:127.0.0.1");
  signed("client", "extendedKeyUsage=clientAuth");
  return {
    dir,
    ca: path("ca.crt"),
    serverCert: path("server.crt"),
    serverKey: path("server.key"),
    clientCert: path("client.crt"),
    clientKey: path("client.key"),
    otherCa: path("other-ca.crt"),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
