/** Bytes a string takes on the wire as a NUL-terminated string. */
export function cstringSize(value: string): number {
  if (value.includes('\0')) throw new RangeError('a protocol string cannot contain a NUL character');
  return Buffer.byteLength(value, 'utf8') + 1;
}

/**
 * Writes one backend message into a buffer allocated once at its exact size: callers compute the
 * body size first (cstringSize for strings), then write each field in order.
 */
export class MessageWriter {
  readonly #buffer: Buffer;
  #offset = 5;

  constructor(type: string, bodySize: number) {
    this.#buffer = Buffer.allocUnsafe(5 + bodySize);
    this.#buffer[0] = type.charCodeAt(0);
    this.#buffer.writeInt32BE(4 + bodySize, 1);
  }

  byte(value: number): this {
    this.#offset = this.#buffer.writeUInt8(value, this.#offset);
    return this;
  }

  int16(value: number): this {
    this.#offset = this.#buffer.writeInt16BE(value, this.#offset);
    return this;
  }

  uint16(value: number): this {
    this.#offset = this.#buffer.writeUInt16BE(value, this.#offset);
    return this;
  }

  int32(value: number): this {
    this.#offset = this.#buffer.writeInt32BE(value, this.#offset);
    return this;
  }

  uint32(value: number): this {
    this.#offset = this.#buffer.writeUInt32BE(value, this.#offset);
    return this;
  }

  /** Callers must have sized the string with cstringSize, which refuses embedded NULs. */
  cstring(value: string): this {
    this.#offset += this.#buffer.write(value, this.#offset, 'utf8');
    this.#buffer[this.#offset++] = 0;
    return this;
  }

  bytes(value: Buffer): this {
    this.#offset += value.copy(this.#buffer, this.#offset);
    return this;
  }

  done(): Buffer {
    if (this.#offset !== this.#buffer.length) throw new RangeError(`message size mismatch: wrote ${this.#offset} of ${this.#buffer.length} bytes`);
    return this.#buffer;
  }
}
