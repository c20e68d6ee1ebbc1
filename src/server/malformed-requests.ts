import type { Server } from "node:http";
import { graphqlErrorBody } from "./json-response.js";

/** A request Node refuses before it reaches the routes (headers too large, malformed) still gets a JSON answer. */
export function answerMalformedRequests(server: Server): void {
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
    const body = JSON.stringify(graphqlErrorBody(tooLarge ? "request headers (or the query string) are too large" : "malformed HTTP request", "BAD_REQUEST"));
    const status = tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
}
