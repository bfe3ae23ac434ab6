// The explorer's sentences: the layout in words (for the aria-live summary) and the address arithmetic
// of one element (shown on hover or keyboard focus, and read out as the cell's name).

import { addressOf, analyse } from "./arithmetic.js";

export const fmt = (a) => `(${a.join(", ")}${a.length === 1 ? "," : ""})`;
export const plural = (n, word) => `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`;

// "offset + i·stride0 + j·stride1 = address" with the numbers: "[1, 2]: 0 + 1·4 + 2·1 = 6".
export function arithmetic(index, stride, offset) {
  const { terms, address } = addressOf(index, stride, offset);
  const sum = [String(offset), ...terms.map(([i, s]) => `${i}·${s}`)].join(" + ");
  return { text: `[${index.join(", ")}]: ${sum} = ${address}`, address };
}

// The formula in letters, for the line above the numbers: offset + i·stride[0] + j·stride[1].
export function formulaInLetters(ndim) {
  const letters = ["i", "j", "k", "l", "m", "n"];
  return ["offset", ...letters.slice(0, ndim).map((v, d) => `${v}·stride[${d}]`)].join(" + ");
}

// The strides and the offset in bytes, beside the element counts: "in bytes (int64, 8 bytes an element):
// stride (32, 8), offset 0". `itemsize` is the dtype's element size.
export function bytesLine(stride, offset, itemsize, dtype = "") {
  const what = `${dtype ? `${dtype}, ` : ""}${plural(itemsize, "byte")} an element`;
  const b = (n) => String(n * itemsize);
  return `in bytes (${what}): stride (${stride.map(b).join(", ")}${stride.length === 1 ? "," : ""}), offset ${b(offset)}`;
}

// The layout in words, for the aria-live region (and anyone who prefers text).
export function describe(shape, stride, offset, size) {
  const a = analyse(shape, stride, offset, size);
  let text = `Shape ${fmt(shape)}, stride ${fmt(stride)}, storage offset ${offset}, over a storage of ${plural(size, "element")}. `;
  if (!a.drawn) return `${text}${plural(a.numel, "element")}: too many to draw.`;
  if (a.numel === 0) return `${text}The view has no elements and reads no storage.`;
  const lo = Math.min(...a.indices);
  const hi = Math.max(...a.indices);
  const where = lo === hi ? `storage element ${lo}` : `storage elements ${lo} to ${hi}`;
  text += a.numel === 1 ? `Its one element reads ${where}` : `Its ${a.numel} elements read ${where}`;
  const repeated = a.numel - a.reads.size;
  text += a.overlap ? `, some more than once (overlap: ${plural(repeated, "repeated read")}). ` : ", each once. ";
  if (a.outside) text += `Out of bounds: ${a.outside} of its elements would read past the end of the storage. `;
  text += a.contiguous ? "Contiguous." : "Not contiguous.";
  return text;
}
