/** Writing what one turn of a session produced to a socket, in as few writes and copies as it can. */
import type { Socket } from 'node:net';

/** Up to this many bytes, pieces are joined for one write: copying a few KB costs less than a stream's corked writev. */
const JOIN_LIMIT = 64 * 1024;

/** The one view that `pieces` make up when each starts in memory where the one before ends (messages forwarded as they came), else undefined. */
export function contiguous(pieces: readonly Buffer[]): Buffer | undefined {
  const first = pieces[0];
  if (!first) return undefined;
  let end = first.byteOffset + first.length;
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i]!;
    if (piece.buffer !== first.buffer || piece.byteOffset !== end) return undefined;
    end += piece.length;
  }
  return Buffer.from(first.buffer, first.byteOffset, end - first.byteOffset);
}

/** Writes a turn's pieces as one write where that is cheap. */
export function writeAll(socket: Socket, pieces: readonly Buffer[]): void {
  const whole = pieces.length === 1 ? pieces[0]! : contiguous(pieces);
  if (whole) {
    socket.write(whole);
    return;
  }
  let total = 0;
  for (const piece of pieces) total += piece.length;
  if (total <= JOIN_LIMIT) {
    socket.write(Buffer.concat(pieces, total));
    return;
  }
  socket.cork();
  for (const piece of pieces) socket.write(piece);
  socket.uncork();
}
