/**
 * Protocol buffers' wire format by hand (protobuf.dev/programming-guides/encoding),
 * with no .proto and no protobuf library: messages are built and read by
 * field number alone, so a test can prove what goes over the wire
 * independently of the service's own message definitions.
 */

const VARINT = 0;
const LENGTH_DELIMITED = 2;

function varint(value: number | bigint): Buffer {
  let rest = BigInt(value);
  const bytes: number[] = [];
  do {
    let byte = Number(rest & 0x7fn);
    rest >>= 7n;
    if (rest > 0n) byte |= 0x80;
    bytes.push(byte);
  } while (rest > 0n);
  return Buffer.from(bytes);
}

/** A field of a message being written: a varint, or bytes (a string, or an embedded message). */
export type WireField = [field: number, value: number | bigint | string | Buffer];

export function encodeMessage(fields: readonly WireField[]): Buffer {
  return Buffer.concat(
    fields.map(([field, value]) => {
      if (typeof value === "number" || typeof value === "bigint") return Buffer.concat([varint((field << 3) | VARINT), varint(value)]);
      const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : value;
      return Buffer.concat([varint((field << 3) | LENGTH_DELIMITED), varint(bytes.length), bytes]);
    }),
  );
}

/** A message read by field number: each field's values in order, varints as bigint, length-delimited fields as bytes. */
export type DecodedMessage = Map<number, (bigint | Buffer)[]>;

export function decodeMessage(bytes: Buffer): DecodedMessage {
  const message: DecodedMessage = new Map();
  let at = 0;
  const readVarint = (): bigint => {
    let value = 0n;
    let shift = 0n;
    for (;;) {
      const byte = bytes[at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
      shift += 7n;
    }
  };
  while (at < bytes.length) {
    const key = readVarint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    let value: bigint | Buffer;
    if (wire === VARINT) value = readVarint();
    else if (wire === LENGTH_DELIMITED) {
      const length = Number(readVarint());
      value = bytes.subarray(at, at + length);
      at += length;
    } else throw new Error(`wire type ${wire} of field ${field} is not one this service sends`);
    message.set(field, [...(message.get(field) ?? []), value]);
  }
  return message;
}

/** The field's only varint value (0 when absent: proto3 leaves defaults out). */
export function varintOf(message: DecodedMessage, field: number): bigint {
  const [value] = message.get(field) ?? [0n];
  if (typeof value !== "bigint") throw new Error(`field ${field} is not a varint`);
  return value;
}

/** The field's embedded messages, in order. */
export function messagesOf(message: DecodedMessage, field: number): DecodedMessage[] {
  return (message.get(field) ?? []).map((value) => {
    if (!Buffer.isBuffer(value)) throw new Error(`field ${field} is not length-delimited`);
    return decodeMessage(value);
  });
}

export function stringOf(message: DecodedMessage, field: number): string {
  const [value] = message.get(field) ?? [Buffer.alloc(0)];
  if (!Buffer.isBuffer(value)) throw new Error(`field ${field} is not length-delimited`);
  return value.toString("utf8");
}
