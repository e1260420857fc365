// Unsigned LEB128, the integer encoding of the .wasm binary format, for the
// build's .wasm tools (short-imports.mjs, order-functions.mjs).

/** The unsigned number at `pos` in `bytes`, and the position after it. */
export function readU32(bytes, pos) {
  let result = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[pos++];
    result += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) return [result, pos];
  }
}
