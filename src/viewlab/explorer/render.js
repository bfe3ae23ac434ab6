// The widget: its controls, its model and its messages. `render({model, el})` is anywidget's contract,
// so JupyterLab, VS Code and Colab run the bundle as it is, and the book inlines it with a small
// stand-in for the model (book/_ext/viewlab_explorer.py). The model holds shape, stride, offset, size
// (storage elements) and values (the storage's values as text, empty without a tensor); the widget
// writes only shape, stride and offset.

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
import { describe, formulaInLetters } from "./words.js";

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
    ),
    el("fieldset", {}, label("op", opSel), label("args", argIn), run),
    msg,
    panes,
    arith,
    legend(),
    summary,
  );
  root.replaceChildren(box);

  // The status line: the answer to what the learner just did. The out-of-bounds line belongs to the
  // layout, so every drawing sets or clears it (a layout set from Python must not keep an old one).
  let outOfBoundsShown = false;
  const say = (text, cls = "") => {
    msg.textContent = text;
    msg.className = `msg ${cls}`;
    outOfBoundsShown = false;
  };
  let quiet = false; // set while the three keys change together: no drawing of a half-changed layout
  const setLayout = (l) => {
    checkLayout(l.shape, l.stride, l.offset);
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
  const fill = () => {
    const l = get();
    shapeIn.value = l.shape.join(", ");
    strideIn.value = l.stride.join(", ");
    offsetIn.value = String(l.offset);
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
    const hadFocus = panes.contains(root.ownerDocument.activeElement);
    fill();
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
    const view = viewPane({ shape, stride, offset }, a, size, values, links);
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
    input.addEventListener("keydown", (e) => e.key === "Enter" && applyTyped());
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
    say("back to the starting layout");
  });
  opSel.addEventListener("change", argHint);
  run.addEventListener("click", runOp);
  argIn.addEventListener("keydown", (e) => e.key === "Enter" && runOp());
  const keys = ["shape", "stride", "offset", "size", "values"];
  const redraw = () => quiet || draw();
  for (const key of keys) model.on(`change:${key}`, redraw);
  argHint();
  draw();
  return () => {
    for (const key of keys) model.off?.(`change:${key}`, redraw);
  };
}

export default { render };
