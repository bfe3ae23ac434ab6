// Which storage elements the strip shows. Every element the view reads is shown, and so is where the
// storage ends; a run of more than RUN elements the view does not read (inside the storage or past its
// end) is cut to EDGE cells at each end around one gap, "… N elements …". A huge stride or offset then
// shows the few cells it reads instead of a thousand hatched ones, and the strip says it was cut.

import { MAX_DRAWN } from "./arithmetic.js";

export const RUN = 16;
export const EDGE = 3;

// [{index} | {gap, from, to}] in storage order, and whether any run was cut. `reads`: storage index ->
// reads. `known` is false when the view has too many elements to list its reads: nothing can be called
// "not read" then, so the storage is shown as it is (its first MAX_DRAWN elements).
export function stripItems(reads, size, offset, known = true) {
  if (!known) {
    const items = Array.from({ length: Math.min(size, MAX_DRAWN) }, (_, i) => ({ index: i }));
    if (size > MAX_DRAWN) items.push({ gap: size - MAX_DRAWN, from: MAX_DRAWN, to: size - 1 });
    return { items, truncated: size > MAX_DRAWN };
  }
  const read = [...reads.keys()].sort((a, b) => a - b);
  const end = Math.max(size, read.length ? read[read.length - 1] + 1 : 0);
  if (end === 0) return { items: [], truncated: false };
  const points = new Set([0, end - 1, ...read]);
  if (offset < end) points.add(offset);
  if (size > 0) points.add(size - 1);
  if (size < end) points.add(size);
  const sorted = [...points].sort((a, b) => a - b);
  const items = [];
  let truncated = false;
  const cells = (from, to) => {
    for (let i = from; i <= to; i++) items.push({ index: i });
  };
  sorted.forEach((p, k) => {
    items.push({ index: p });
    const q = k + 1 < sorted.length ? sorted[k + 1] : p + 1;
    const between = q - p - 1;
    if (between <= RUN) {
      cells(p + 1, q - 1);
    } else {
      truncated = true;
      cells(p + 1, p + EDGE);
      items.push({ gap: between - 2 * EDGE, from: p + EDGE + 1, to: q - EDGE - 1 });
      cells(q - EDGE, q - 1);
    }
  });
  if (items.length > MAX_DRAWN + 4 * RUN) {
    // only reachable from a layout with more storage than explore() allows: keep the first cells
    const cut = items.slice(0, MAX_DRAWN);
    const last = cut[cut.length - 1];
    const from = (last.to ?? last.index) + 1;
    cut.push({ gap: end - from, from, to: end - 1 });
    return { items: cut, truncated: true };
  }
  return { items, truncated };
}
