// The explorer's picture: the storage strip, the view's grids and the legend, drawn from a layout that
// arithmetic.js has analysed. Nothing here changes the layout; render.js owns the controls and the model.

import { MAX_DRAWN, numel } from "./arithmetic.js";
import { roving } from "./keyboard.js";
import { stripItems } from "./strip.js";
import { fillOf, inkOn } from "./style.js";
import { arithmetic, bytesLine, formulaInLetters, plural } from "./words.js";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

// A cell's content: the value with "@k" under it (as draw_layout's figure writes it), or k alone when
// the explorer has no values (a layout without a tensor, or the book's own examples).
function content(k, values) {
  if (k < values.length) return [el("span", { text: values[k] }), el("small", { text: `@${k}` })];
  return [String(k)];
}

function paint(cell, k, size) {
  if (k >= size) return;
  cell.style.background = fillOf(k);
  cell.style.color = inkOn(fillOf(k));
}

// What each mark means, with a sample cell drawn by the same rules as the real ones.
export function legend() {
  const sample = (cls, text) => el("span", { class: `c ${cls}`, "aria-hidden": "true", text });
  const item = (cell, words) => el("li", {}, cell, words);
  const overlap = sample("over", "7");
  const colour = sample("", "5");
  const offset = sample("off", "4");
  const hot = sample("hot", "2");
  for (const [cell, k] of [
    [overlap, 7],
    [colour, 5],
    [offset, 4],
    [hot, 2],
  ]) {
    paint(cell, k, Infinity);
  }
  return el(
    "ul",
    { class: "legend", "aria-label": "legend" },
    item(colour, "colour: storage element k (@k under a value), the same colour wherever it is read"),
    item(overlap, "purple outline, ×N under the storage cell: read N times (overlap)"),
    item(sample("oob", "12"), "red dashed border, hatched: outside the storage (out of bounds)"),
    item(offset, "blue bar: the storage offset, where the view starts"),
    item(sample("unread", "3"), "grey: never read by the view"),
    item(hot, "black ring: the element you point at or focus, and the storage element it reads"),
  );
}

// The storage strip; runs of elements the view does not read are cut (strip.js) and the strip says so.
export function storagePane(a, size, offset, values) {
  const pane = el("div", { class: "pane storage" });
  pane.append(el("h4", { text: `storage (${plural(size, "element")}; offset ${offset})` }));
  const strip = el("div", { class: "cells", role: "list", "aria-label": "storage elements" });
  const { items, truncated } = stripItems(a.reads, size, offset, a.drawn);
  const cellsByIndex = new Map();
  for (const item of items) {
    if (item.gap !== undefined) {
      const what = a.drawn ? "not read" : "not drawn";
      const words = `… ${plural(item.gap, "element")} ${what} (${item.from} to ${item.to}) …`;
      strip.append(el("div", { class: "gap", role: "listitem", text: words }));
      continue;
    }
    const i = item.index;
    const reads = a.reads.get(i) || 0;
    // as draw_layout's strip: the index above, the value inside (the index alone without values)
    const text = i < values.length ? values[i] : String(i);
    const cell = el("div", { class: "c", "data-index": String(i), "data-lm-suppress-shortcuts": "true", text });
    paint(cell, i, size);
    const where = i >= size ? "outside the storage" : `storage element ${i}`;
    const count = a.drawn ? `read ${plural(reads, "time")}` : "reads not counted";
    cell.title = `${where}${i < values.length ? `, value ${values[i]}` : ""}: ${count}`;
    if (i >= size) cell.classList.add("oob");
    else if (!reads && a.drawn) cell.classList.add("unread");
    if (reads > 1) cell.classList.add("over");
    if (i === offset) cell.classList.add("off");
    const above = el("span", { class: "idx", text: i < values.length ? String(i) : "" });
    const below = el("span", { class: "n", text: reads > 1 ? `×${reads}` : "" });
    const wrap = el("div", { class: "sc", role: "listitem" }, above, cell, below);
    cellsByIndex.set(i, cell);
    strip.append(wrap);
  }
  pane.append(strip);
  if (truncated) {
    const words = a.drawn
      ? "The strip is cut: runs of elements the view does not read are shown as “… N elements …”; every element it reads is shown."
      : `The strip is cut: only the first ${MAX_DRAWN} storage elements are shown.`;
    pane.append(el("div", { class: "trunc", role: "note", text: words }));
  }
  const note = a.drawn ? "grey: never read" : "too many view elements to count their reads";
  pane.append(el("div", { class: "sub", text: `the view starts at storage element ${offset} (the offset); ${note}` }));
  return { pane, cellsByIndex };
}

// The logical view: a 2-D grid per index of the leading dims (a row for 1-D, one cell for 0-d), with
// the row and column numbers on its edges. `arith` is the line that shows a cell's address arithmetic.
// With the dtype's element size (`layout.itemsize`, 0 when unknown) the strides are given in bytes too.
export function viewPane(layout, a, size, values, links) {
  const { shape, stride, offset, itemsize = 0, dtype = "" } = layout;
  const pane = el("div", { class: "pane view" });
  pane.append(el("h4", { text: `view (${shape.join(", ")}${shape.length === 1 ? "," : ""}), stride (${stride.join(", ")})` }));
  if (itemsize > 0) pane.append(el("div", { class: "sub bytes", text: bytesLine(stride, offset, itemsize, dtype) }));
  if (!a.drawn) {
    pane.append(el("div", { class: "err", text: `${plural(a.numel, "element")}: too many to draw (at most ${MAX_DRAWN})` }));
    return { pane, cells: [] };
  }
  if (a.numel === 0) {
    pane.append(el("div", { class: "sub", text: "no elements" }));
    return { pane, cells: [] };
  }
  const rows = shape.length >= 2 ? shape[shape.length - 2] : 1;
  const cols = shape.length >= 1 ? shape[shape.length - 1] : 1;
  const lead = shape.slice(0, Math.max(shape.length - 2, 0));
  const count = numel(lead);
  const cells = [];
  for (let g = 0; g < count; g++) {
    const leadIdx = [];
    let rest = g;
    for (let d = lead.length - 1; d >= 0; d--) {
      leadIdx.unshift(rest % lead[d]);
      rest = Math.floor(rest / lead[d]);
    }
    if (lead.length) pane.append(el("div", { class: "sub", text: `[${[...leadIdx, ":", ":"].join(", ")}]` }));
    // data-lm-suppress-shortcuts: JupyterLab leaves the arrow keys to the grid (not to its cell selection)
    const grid = el("div", {
      class: "grid",
      role: "grid",
      "aria-label": "elements of the view",
      "data-lm-suppress-shortcuts": "true",
    });
    const labelled = shape.length >= 1;
    grid.style.gridTemplateColumns = labelled ? `auto repeat(${cols}, auto)` : "auto";
    if (labelled) {
      const head = el("div", { role: "row", style: "display:contents" }, el("span", { class: "ax" }));
      for (let c = 0; c < cols; c++) head.append(el("span", { class: "ax", role: "columnheader", text: String(c) }));
      grid.append(head);
    }
    for (let r = 0; r < rows; r++) {
      const row = el("div", { role: "row", style: "display:contents" });
      if (labelled) row.append(el("span", { class: "ax", role: "rowheader", text: shape.length >= 2 ? String(r) : "" }));
      for (let c = 0; c < cols; c++) {
        const index = [...leadIdx, ...(shape.length >= 2 ? [r] : []), ...(shape.length >= 1 ? [c] : [])];
        row.append(viewCell(index, a.indices[cells.length], layout, a, size, values, links));
        cells.push(row.lastChild);
      }
      grid.append(row);
    }
    pane.append(grid);
  }
  roving(cells, { rows, cols, count }, links.focusAt, links.moved);
  return { pane, cells };
}

function viewCell(index, at, { stride, offset, itemsize = 0 }, a, size, values, links) {
  const cell = el("div", { class: "c", role: "gridcell", tabindex: "-1", "data-lm-suppress-shortcuts": "true" }, ...content(at, values));
  cell.dataset.storage = String(at);
  cell.dataset.index = index.join(", ");
  paint(cell, at, size);
  const reads = a.reads.get(at);
  const sum = arithmetic(index, stride, offset);
  let words = `element ${sum.text}`;
  if (itemsize > 0) words += `, at byte ${at * itemsize} (${at} × ${itemsize})`;
  if (at < values.length) words += `, value ${values[at]}`;
  if (at >= size) {
    cell.classList.add("oob");
    words += ", out of bounds";
  } else if (reads > 1) {
    cell.classList.add("over");
    words += `, shared with ${plural(reads - 1, "other element")}`;
  }
  cell.setAttribute("aria-label", words);
  // One element at a time is "current": the one under the pointer, else the one with the focus.
  const show = (on) => {
    for (const c of links.storage.values()) c.classList.remove("hot");
    const focused = links.shows.get(cell.ownerDocument.activeElement);
    if (on) {
      links.storage.get(at)?.classList.add("hot");
      links.arith.textContent = `${formulaInLetters(index.length)} = address: ${words}`;
    } else if (focused && focused !== showThis) {
      focused();
    } else {
      links.arith.textContent = links.hint;
    }
  };
  const showThis = () => show(true);
  links.shows.set(cell, showThis);
  cell.addEventListener("focus", showThis);
  cell.addEventListener("blur", () => show(false));
  cell.addEventListener("mouseenter", showThis);
  cell.addEventListener("mouseleave", () => show(false));
  return cell;
}

// The other direction: pointing at a storage element, or moving to it with the keyboard (the strip is
// the explorer's second Tab stop, with the same keys), lights every element of the view that reads it
// and names them on the arithmetic line.
export function linkStorage(cellsByIndex, viewCells, links) {
  const readers = new Map();
  for (const cell of viewCells) {
    const k = Number(cell.dataset.storage);
    readers.set(k, [...(readers.get(k) || []), cell]);
  }
  const strip = [...cellsByIndex.values()];
  for (const [k, cell] of cellsByIndex) {
    const who = (readers.get(k) || []).map((v) => `[${v.dataset.index}]`);
    const words = `${cell.title}${who.length ? `; read by ${who.join(", ")}` : ""}`;
    cell.setAttribute("aria-label", words);
    const light = (on) => {
      for (const c of strip) c.classList.remove("hot");
      for (const v of viewCells) v.classList.remove("hot");
      if (!on) {
        links.arith.textContent = links.hint;
        return;
      }
      cell.classList.add("hot");
      for (const v of readers.get(k) || []) v.classList.add("hot");
      links.arith.textContent = words;
    };
    cell.addEventListener("mouseenter", () => light(true));
    cell.addEventListener("mouseleave", () => light(cell.ownerDocument.activeElement === cell));
    cell.addEventListener("focus", () => light(true));
    cell.addEventListener("blur", () => light(false));
  }
  if (strip.length) roving(strip, { rows: 1, cols: strip.length, count: 1 }, 0, () => {});
}

// A view wider than its box scrolls inside it; on a phone nothing else would show that columns are cut.
export function scrollCue(pane) {
  const cue = el("div", { class: "sub cue", text: "the view is wider than this box: scroll it sideways to see every column" });
  cue.hidden = true;
  pane.append(cue);
  const check = () => {
    cue.hidden = pane.scrollWidth <= pane.clientWidth + 1;
  };
  if (typeof ResizeObserver === "function") new ResizeObserver(check).observe(pane);
  requestAnimationFrame(check);
}
