import { ProtocolViolation } from './errors.js';

/** Bounds-checked cursor over one message body; every overrun is a ProtocolViolation naming the message. */
export class BodyReader {
  #offset: number;

  /** Reads `body` from `start`: a whole message is read past its header without a view of its body. */
  constructor(
    private readonly body: Buffer,
    private readonly what: string,
    start = 0,
  ) {
    this.#offset = start;
  }

  get remaining(): number {
    return this.body.length - this.#offset;
  }

  fail(problem: string): ProtocolViolation {
    return new ProtocolViolation(`invalid ${this.what} message: ${problem}`);
  }

  byte(): number {
    this.#need(1);
    return this.body[this.#offset++] as number;
  }

  int16(): number {
    this.#need(2);
    const value = this.body.readInt16BE(this.#offset);
    this.#offset += 2;
    return value;
  }

  /** PostgreSQL reads counts and format codes as unsigned 16-bit (pq_getmsgint(msg, 2)): 65,535 parameters are legal. */
  uint16(): number {
    this.#need(2);
    const value = this.body.readUInt16BE(this.#offset);
    this.#offset += 2;
    return value;
  }

  int32(): number {
    this.#need(4);
    const value = this.body.readInt32BE(this.#offset);
    this.#offset += 4;
    return value;
  }

  uint32(): number {
    this.#need(4);
    const value = this.body.readUInt32BE(this.#offset);
    this.#offset += 4;
    return value;
  }

  cstring(): string {
    // Most names on the wire are empty (the unnamed statement and portal): no native calls for those.
    if (this.body[this.#offset] === 0) {
      this.#offset += 1;
      return '';
    }
    const nul = this.body.indexOf(0, this.#offset);
    if (nul < 0) throw this.fail('missing string terminator');
    const value = this.body.toString('utf8', this.#offset, nul);
    this.#offset = nul + 1;
    return value;
  }

  /** A view into the body, not a copy. */
  bytes(length: number): Buffer {
    this.#need(length);
    const value = this.body.subarray(this.#offset, this.#offset + length);
    this.#offset += length;
    return value;
  }

  rest(): Buffer {
    return this.bytes(this.remaining);
  }

  /** PostgreSQL refuses trailing bytes (pq_getmsgend); so do we. */
  end(): void {
    if (this.remaining !== 0) throw this.fail(`${this.remaining} unexpected trailing bytes`);
  }

  #need(length: number): void {
    if (length < 0 || length > this.remaining) throw this.fail('insufficient data left in message');
  }
}
