/**
 * Bytes received but not yet framed, kept as the chunks they arrived in. Taking a message that lies
 * inside one chunk returns a view of it; only a message spanning chunks is copied, once.
 */
export class ChunkQueue {
  readonly #chunks: Buffer[] = [];
  /** Bytes of #chunks[0] already taken. */
  #head = 0;
  #length = 0;

  get length(): number {
    return this.#length;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#length += chunk.length;
  }

  /** The byte at `index` from the front; callers check `length` first. */
  byteAt(index: number): number {
    let at = this.#head + index;
    for (const chunk of this.#chunks) {
      if (at < chunk.length) return chunk[at] as number;
      at -= chunk.length;
    }
    throw new RangeError(`byteAt(${index}) beyond ${this.#length} queued bytes`);
  }

  int32At(index: number): number {
    const first = this.#chunks[0];
    if (first !== undefined && this.#head + index + 4 <= first.length) return first.readInt32BE(this.#head + index);
    return (this.byteAt(index) << 24) | (this.byteAt(index + 1) << 16) | (this.byteAt(index + 2) << 8) | this.byteAt(index + 3);
  }

  /** Removes and returns the first `size` bytes; callers check `length` first. */
  take(size: number): Buffer {
    const first = this.#chunks[0];
    if (first === undefined || size > this.#length) throw new RangeError(`take(${size}) beyond ${this.#length} queued bytes`);
    this.#length -= size;
    const end = this.#head + size;
    if (end <= first.length) {
      const view = first.subarray(this.#head, end);
      if (end === first.length) this.#advance(1, 0);
      else this.#head = end;
      return view;
    }
    const out = Buffer.allocUnsafe(size);
    let written = 0;
    let used = 0;
    let head = this.#head;
    while (written < size) {
      const chunk = this.#chunks[used] as Buffer;
      const n = Math.min(size - written, chunk.length - head);
      chunk.copy(out, written, head, head + n);
      written += n;
      head += n;
      if (head === chunk.length) {
        used++;
        head = 0;
      }
    }
    this.#advance(used, head);
    return out;
  }

  /** Drops `used` whole chunks at once (one splice, not one shift per chunk) and sets the new head. */
  #advance(used: number, head: number): void {
    if (used > 0) this.#chunks.splice(0, used);
    this.#head = head;
  }
}
