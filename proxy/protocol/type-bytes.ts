/** Each byte as a one-character string: message type bytes are named without making a string per message. */
export const TYPE_OF_BYTE: readonly string[] = Array.from({ length: 256 }, (_, byte) => String.fromCharCode(byte));
