// The widget: its controls, its model and its messages. `render({model, el})` is anywidget's contract,
// so JupyterLab, VS Code and Colab run the bundle as it is, and the book inlines it with a small
// stand-in for the model (book/_ext/viewlab_explorer.py). The model holds shape, stride, offset, size
// (storage elements), values (the storage's values as text, empty without a tensor), dtype and itemsize
// (its name and bytes per element, "" and 0 when unknown); the widget writes only shape, stride and offset.
// Every layout change made here is kept in a short history: Undo (or Ctrl+Z inside the explorer) goes back.

import {
  analyse,
  asStrided,
  checkLayout,
  contiguous,
  contiguousStrides,
  expand,
  permute,
  slice,
  transpose,
  unfold,
  unsqueeze,
  viewOrCopy,
} from "./arithmetic.js";
import { el, legend, linkStorage, scrollCue, storagePane, viewPane } from "./panes.js";
import { CSS } from "./style.js";
import { describe, fmt, formulaInLetters } from "./words.js";

const OPS = {
  transpose: ["dim0, dim1", "0, 1", (l, a) => transpose(l, a[0], a[1])],
  permute: ["dims", "1, 0", (l, a) => permute(l, a)],
  slice: ["dim, start, stop, step", "0, 0, 3, 2", (l, a) => slice(l, a[0], a[1], a[2], a[3] ?? 1)],
  expand: ["sizes", "2, -1, -1", (l, a) => expand(l, a)],
  unsqueeze: ["dim", "0", (l, a) => unsqueeze(l, a[0])],
  unfold: ["dim, size, step", "0, 2, 1", (l, a) => unfold(l, a[0], a[1], a[2])],
  as_strided: ["shape; stride; offset", "2, 2; 1, 1; 0", null],
  view: ["shape", "-1", (l, a) => viewOrCopy(l, a, "view")],
  reshape: ["shape", "-1", (l, a) => viewOrCopy(l, a, "reshape")],
  contiguous: ["(no arguments)", "", (l) => contiguous(l)],
};

export const parseInts = (text) => {
  const s = text.trim().replace(/^[[(]|[\])]$/g, "");
  if (s === "") return [];
  const parts = s.split(/[\s,]+/).filter((p) => p !== "");
  const out = parts.map((p) => (/^-?\d+$/.test(p) ? Number(p) : NaN));
  if (out.some((v) => Number.isNaN(v))) throw new Error(`"${text}" is not a list of whole numbers`);
  return out;
};

// The offset field holds one whole number: "" , "1e1" or "0x3" are refused, not read as 0, 10 or 3.
export const parseOffset = (text) => {
  if (!/^\s*\d+\s*$/.test(text)) throw new Error(`the storage offset must be one whole number >= 0, got "${text}"`);
  return Number(text);
};

const HINT_KEYS = "Tab into the view (or on to the storage strip), then the arrow keys move between elements";
const HISTORY = 20; // layout changes Undo can go back through
const FIELD_KEYS = "↑ ↓ in a field: step the number at the cursor (Shift: by 10) · Undo or Ctrl+Z: the last layout change";

// Up/Down in a field: the whole number the caret is in (or the last one before it, or the first) stepped
// by `delta`, never below `min`. Returns the new text, the caret at the end of that number and which number
// of the list it is; null when the text holds no number.
export function stepAt(text, caret, delta, min = 0) {
  const spans = [...text.matchAll(/-?\d+/g)].map((m) => [m.index, m.index + m[0].length, Number(m[0])]);
  if (!spans.length) return null;
  let k = spans.findIndex(([a, b]) => a <= caret && caret <= b);
  if (k < 0) k = Math.max(spans.filter(([, b]) => b <= caret).length - 1, 0);
  const [a, b, n] = spans[k];
  const v = String(Math.max(min, n + delta));
  return { text: text.slice(0, a) + v + text.slice(b), caret: a + v.length, k };
}

// The end of the k-th number in `text` (where the caret goes back after a redraw rewrote the field).
const endOfNumber = (text, k) => {
  const m = [...text.matchAll(/-?\d+/g)][k];
  return m ? m.index + m[0].length : text.length;
};

export function render({ model, el: root }) {
  const get = () => ({ shape: model.get("shape"), stride: model.get("stride"), offset: model.get("offset") });
  const start = get();
  if (!root.ownerDocument.getElementById("viewlab-explorer-css")) {
    root.ownerDocument.head.append(el("style", { id: "viewlab-explorer-css", text: CSS }));
  }
  const box = el("div", { class: "vx", role: "group", "aria-label": "stride explorer" });
  const shapeIn = el("input", { "aria-label": "shape", name: "shape" });
  const strideIn = el("input", { "aria-label": "stride", name: "stride" });
  const offsetIn = el("input", { "aria-label": "storage offset", name: "offset", class: "n" });
  const apply = el("button", { type: "button", text: "Apply layout" });
  const packed = el("button", { type: "button", name: "contiguous-strides", text: "Contiguous strides" });
  const reset = el("button", { type: "button", text: "Reset" });
  const undo = el("button", { type: "button", name: "undo", text: "Undo", "aria-keyshortcuts": "Control+Z" });
  undo.title = "Undo the last layout change (Ctrl+Z inside the explorer)";
  const opSel = el("select", { "aria-label": "operator", name: "op" });
  for (const name of Object.keys(OPS)) opSel.append(el("option", { value: name, text: name }));
  const argIn = el("input", { "aria-label": "operator arguments", name: "args" });
  const run = el("button", { type: "button", text: "Apply op" });
  const msg = el("div", { class: "msg", role: "status" });
  const arith = el("div", { class: "arith", "aria-hidden": "true" });
  const summary = el("div", { class: "sub summary" });
  const panes = el("div", { class: "panes" });
  const label = (text, input) => el("label", {}, `${text} `, input);
  box.append(
    el(
      "fieldset",
      {},
      label("shape", shapeIn),
      label("stride", strideIn),
      label("offset", offsetIn),
      apply,
      packed,
      reset,
      undo,
    ),
    el("div", { class: "sub keys", text: FIELD_KEYS }),
    el("fieldset", {}, label("op", opSel), label("args", argIn), run),
    msg,
    panes,
    arith,
    legend(),
    summary,
  );
  root.replaceChildren(box);
  // A key pressed on a button or the operator menu is the explorer's: JupyterLab's command-mode shortcuts
  // match the focused element itself unless it carries this attribute ("a" would insert a cell above).
  // The text fields need none (JupyterLab leaves editable elements alone); the cells carry it (panes.js).
  for (const control of box.querySelectorAll("button, select")) control.setAttribute("data-lm-suppress-shortcuts", "true");

  // The status line: the answer to what the learner just did. The out-of-bounds line belongs to the
  // layout, so every drawing sets or clears it (a layout set from Python must not keep an old one).
  let outOfBoundsShown = false;
  const say = (text, cls = "") => {
    msg.textContent = text;
    msg.className = `msg ${cls}`;
    outOfBoundsShown = false;
  };
  let quiet = false; // set while the three keys change together: no drawing of a half-changed layout
  const history = []; // earlier layouts, the newest last
  const copyOf = (l) => ({ shape: l.shape.slice(), stride: l.stride.slice(), offset: l.offset });
  const setLayout = (l, record = true) => {
    checkLayout(l.shape, l.stride, l.offset);
    const before = copyOf(get());
    if (record && JSON.stringify(before) !== JSON.stringify(copyOf(l))) {
      history.push(before);
      if (history.length > HISTORY) history.shift();
    }
    quiet = true;
    try {
      model.set("shape", l.shape.slice());
      model.set("stride", l.stride.slice());
      model.set("offset", l.offset);
    } finally {
      quiet = false;
    }
    model.save_changes();
    draw();
  };
  const filled = new Map(); // what fill() last wrote in each field: anything else is a pending edit
  const fill = () => {
    const l = get();
    shapeIn.value = l.shape.join(", ");
    strideIn.value = l.stride.join(", ");
    offsetIn.value = String(l.offset);
    for (const input of [shapeIn, strideIn, offsetIn]) filled.set(input, input.value);
  };
  const argHint = () => {
    const [hint, example] = OPS[opSel.value];
    argIn.placeholder = hint;
    argIn.value = example;
    argIn.disabled = opSel.value === "contiguous";
  };

  let focusAt = 0; // the view's one Tab stop, kept across redraws
  function draw() {
    const { shape, stride, offset } = get();
    const size = model.get("size");
    const values = model.get("values") || [];
    const itemsize = Number(model.get("itemsize")) || 0;
    const dtype = String(model.get("dtype") || "");
    const hadFocus = panes.contains(root.ownerDocument.activeElement);
    fill();
    undo.setAttribute("aria-disabled", String(history.length === 0)); // focusable still: it says why not
    try {
      checkLayout(shape, stride, offset); // the kernel may send shape and stride one message apart
    } catch (err) {
      say(`waiting for a whole layout: ${err.message}`, "err");
      return;
    }
    const a = analyse(shape, stride, offset, size);
    summary.textContent = describe(shape, stride, offset, size);
    box.dataset.indices = JSON.stringify(a.indices); // for tests and anyone scripting the page
    const hint = `${formulaInLetters(shape.length)} = address: point at an element of the view to see it with the numbers. ${HINT_KEYS}.`;
    arith.textContent = hint;
    const storage = storagePane(a, size, offset, values);
    const links = { storage: storage.cellsByIndex, arith, hint, focusAt, moved: (k) => (focusAt = k), shows: new Map() };
    const view = viewPane({ shape, stride, offset, itemsize, dtype }, a, size, values, links);
    linkStorage(storage.cellsByIndex, view.cells, links);
    panes.replaceChildren(view.pane, storage.pane);
    scrollCue(view.pane);
    if (hadFocus && view.cells.length) view.cells[Math.min(focusAt, view.cells.length - 1)].focus();
    if (!a.inBounds) {
      say(`out of bounds: the view needs ${a.needed} storage elements, the storage has ${size}`, "err");
      outOfBoundsShown = true;
    } else if (outOfBoundsShown || msg.textContent.startsWith("waiting for a whole layout")) {
      say("");
    }
  }

  const applyTyped = () => {
    try {
      setLayout({ shape: parseInts(shapeIn.value), stride: parseInts(strideIn.value), offset: parseOffset(offsetIn.value) });
      const a = analyse(get().shape, get().stride, get().offset, model.get("size"));
      if (a.inBounds) say(a.overlap ? "overlap: some storage elements are read more than once" : "layout applied");
    } catch (err) {
      say(err.message, "err");
    }
  };
  // A shape with another number of dims than the stride: say what to do next, not an error yet (the
  // learner leaving the shape field for the stride field is about to type it).
  const shapeChanged = () => {
    let dims;
    try {
      dims = parseInts(shapeIn.value).length;
    } catch (err) {
      say(err.message, "err");
      return;
    }
    if (dims !== get().stride.length) {
      say(`the shape has ${dims} dims: give ${dims} strides, or press Contiguous strides`);
      return;
    }
    applyTyped();
  };
  const runOp = () => {
    try {
      const op = opSel.value;
      let result;
      if (op === "as_strided") {
        const [s, t, o] = argIn.value.split(";").map((p) => parseInts(p));
        result = asStrided(get(), s, t ?? [], (o ?? [0])[0] ?? 0);
      } else {
        result = OPS[op][2](get(), parseInts(argIn.value));
      }
      if (result.kind === "copy") {
        say(`${result.why}. A copy has a storage of its own: the explorer keeps the current layout.`, "copy");
        return;
      }
      setLayout(result);
      if (result.kind === "view") say(result.why, "viewok");
      else if (analyse(result.shape, result.stride, result.offset, model.get("size")).inBounds) say(`${op}: a view`);
    } catch (err) {
      say(`${opSel.value}: ${err.message}`, "err");
    }
  };
  shapeIn.addEventListener("change", shapeChanged);
  for (const input of [strideIn, offsetIn]) input.addEventListener("change", applyTyped);
  for (const input of [shapeIn, strideIn, offsetIn]) {
    input.addEventListener("keydown", (e) => (e.key === "Enter" ? applyTyped() : step(input, e)));
  }
  apply.addEventListener("click", applyTyped);
  packed.addEventListener("click", () => {
    try {
      const shape = parseInts(shapeIn.value);
      setLayout({ shape, stride: contiguousStrides(shape), offset: parseOffset(offsetIn.value) });
      say(`contiguous strides for shape (${shape.join(", ")}): each dim steps over all the dims after it`);
    } catch (err) {
      say(err.message, "err");
    }
  });
  reset.addEventListener("click", () => {
    setLayout(start);
    say("back to the starting layout (Undo goes back to the one before)");
  });
  const undoLast = () => {
    const last = history.pop();
    if (!last) {
      say("nothing to undo: the layout has not been changed here");
      return;
    }
    setLayout(last, false);
    const back = `undone: back to shape ${fmt(last.shape)}, stride ${fmt(last.stride)}, offset ${last.offset}`;
    const a = analyse(last.shape, last.stride, last.offset, model.get("size"));
    if (a.inBounds) {
      say(back);
    } else {
      say(`${back}; out of bounds: the view needs ${a.needed} storage elements, the storage has ${model.get("size")}`, "err");
      outOfBoundsShown = true; // the next drawing in bounds clears it, as any out-of-bounds line
    }
  };
  undo.addEventListener("click", undoLast);
  // Ctrl+Z (Cmd+Z) anywhere inside the explorer, except in a field with an edit not applied yet (or the
  // operator's arguments): there it stays the browser's undo of the typing.
  box.addEventListener("keydown", (e) => {
    if (!(e.ctrlKey || e.metaKey) || e.altKey || e.shiftKey || e.key.toLowerCase() !== "z") return;
    if (e.target === argIn || (filled.has(e.target) && e.target.value !== filled.get(e.target))) return;
    e.preventDefault();
    undoLast();
  });
  // Up/Down in a layout field: step the number at the cursor and apply the layout at once.
  const step = (input, e) => {
    if ((e.key !== "ArrowUp" && e.key !== "ArrowDown") || e.ctrlKey || e.metaKey || e.altKey) return;
    const caret = input.selectionStart ?? input.value.length;
    const r = stepAt(input.value, caret, (e.key === "ArrowUp" ? 1 : -1) * (e.shiftKey ? 10 : 1));
    if (!r) return;
    e.preventDefault();
    input.value = r.text;
    if (input === shapeIn) shapeChanged();
    else applyTyped();
    const at = input.value === r.text ? r.caret : endOfNumber(input.value, r.k);
    input.setSelectionRange(at, at);
  };
  opSel.addEventListener("change", argHint);
  run.addEventListener("click", runOp);
  argIn.addEventListener("keydown", (e) => e.key === "Enter" && runOp());
  const keys = ["shape", "stride", "offset", "size", "values", "dtype", "itemsize"];
  const redraw = () => quiet || draw();
  for (const key of keys) model.on(`change:${key}`, redraw);
  argHint();
  draw();
  return () => {
    for (const key of keys) model.off?.(`change:${key}`, redraw);
  };
}

export default { render };
