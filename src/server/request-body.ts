import type { IncomingMessage } from "node:http";

export class BodyTooLarge extends Error {}

/**
 * A POST's body: parsed when its content type says JSON, its text otherwise
 * (Apollo words the refusal), undefined when empty or not a POST. Rejects with
 * BodyTooLarge past `limit` bytes, and with JSON's SyntaxError.
 */
export async function requestBodyOf(req: IncomingMessage, limit: number): Promise<unknown> {
  return req.method === "POST" ? parseBody(await readBody(req, limit), req.headers["content-type"]) : undefined;
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new BodyTooLarge());
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8")));
    req.on("error", reject);
  });
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (text === "") return undefined;
  return contentType?.includes("json") ? JSON.parse(text) : text;
}
