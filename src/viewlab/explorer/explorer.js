// The stride explorer: one ES module, no imports, no network.
// The first half is the layout arithmetic, written as torch computes it (checked against real torch over
// generated cases: tests/unit/test_explore.py). The second half draws it: `render({model, el})` is
// anywidget's contract, so JupyterLab, VS Code and Colab run this file as it is, and the book inlines it
// with a small stand-in for the model (book/_ext/viewlab_explorer.py).
//
// A layout is {shape, stride, offset}: element (i0, i1, ...) of the view reads storage element
// offset + i0*stride[0] + i1*stride[1] + ...  (strides and offset count elements, not bytes).

export const MAX_DRAWN = 1024; // more cells than this would not fit a page: the explorer says so instead

const isInt = (v) => Number.isInteger(v);
export const numel = (shape) => shape.reduce((a, b) => a * b, 1);

// torch's wrapping of a dim index: -1 is the last dim; `n` dims allow -n..n-1.
function wrapDim(dim, n, what = "dim") {
  const m = Math.max(n, 1); // a 0-d tensor accepts dim 0 and -1 (torch treats it as one dim here)
  if (!isInt(dim) || dim < -m || dim >= m) {
    throw new Error(`${what} ${dim} is out of range: expected a dim in ${-m}..${m - 1}`);
  }
  return dim < 0 ? dim + m : dim;
}

// Contiguous (row-major) strides: a dim of size 0 counts as 1, as torch does, so strides stay positive.
export function contiguousStrides(shape) {
  const stride = new Array(shape.length);
  let z = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    stride[d] = z;
    z *= Math.max(shape[d], 1);
  }
  return stride;
}

// torch's is_contiguous: dims of size 1 do not matter; a tensor with no elements is contiguous.
export function isContiguous(shape, stride) {
  if (numel(shape) === 0) return true;
  let z = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1) {
      if (stride[d] !== z) return false;
      z *= shape[d];
    }
  }
  return true;
}

// The storage element each logical element reads, in row-major order of the view.
export function storageIndices(shape, stride, offset) {
  const out = [];
  const n = numel(shape);
  const idx = new Array(shape.length).fill(0);
  for (let k = 0; k < n; k++) {
    let at = offset;
    for (let d = 0; d < shape.length; d++) at += idx[d] * stride[d];
    out.push(at);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// How many storage elements the layout needs: torch's computeStorageNbytes in elements (0 if it has none).
export function storageNeeded(shape, stride, offset) {
  if (shape.some((s) => s === 0)) return 0;
  return offset + 1 + shape.reduce((acc, s, d) => acc + (s - 1) * stride[d], 0);
}

// Everything the picture needs about a layout over a storage of `size` elements.
export function analyse(shape, stride, offset, size) {
  const n = numel(shape);
  const needed = storageNeeded(shape, stride, offset);
  const result = { numel: n, needed, size, inBounds: needed <= size, drawn: n <= MAX_DRAWN };
  result.indices = result.drawn ? storageIndices(shape, stride, offset) : [];
  const reads = new Map();
  for (const i of result.indices) reads.set(i, (reads.get(i) || 0) + 1);
  result.reads = reads; // storage index -> how many logical elements read it
  result.overlap = result.drawn ? reads.size < n : null; // two logical elements on one storage element
  result.outside = result.indices.filter((i) => i >= size).length;
  result.contiguous = isContiguous(shape, stride);
  return result;
}

// A layout as the user typed it: ints only, strides and offset >= 0 (torch refuses negative strides).
export function checkLayout(shape, stride, offset) {
  if (!Array.isArray(shape) || !shape.every((s) => isInt(s) && s >= 0)) throw new Error("every size must be an int >= 0");
  if (!Array.isArray(stride) || !stride.every((s) => isInt(s))) throw new Error("every stride must be an int");
  if (stride.length !== shape.length) {
    throw new Error(`shape has ${shape.length} dims but stride has ${stride.length}: give one stride per dim`);
  }
  if (stride.some((s) => s < 0)) throw new Error("torch does not support negative strides");
  if (!isInt(offset) || offset < 0) throw new Error("the storage offset must be an int >= 0");
}

// torch's infer_size: one -1 in a view's shape stands for whatever makes the element counts agree.
export function inferSize(newShape, n) {
  let known = 1;
  let infer = -1;
  newShape.forEach((s, d) => {
    if (s === -1) {
      if (infer >= 0) throw new Error("only one dimension can be inferred (-1)");
      infer = d;
    } else if (isInt(s) && s >= 0) {
      known *= s;
    } else {
      throw new Error(`invalid shape dimension ${s}`);
    }
  });
  const out = newShape.slice();
  if (infer >= 0) {
    if (known === 0) {
      throw new Error(`cannot reshape a tensor of ${n} elements into [${newShape}]: the -1 is ambiguous`);
    }
    if (n % known === 0) out[infer] = n / known;
  }
  if (numel(out) !== n || (infer >= 0 && n % known !== 0)) {
    throw new Error(`shape [${newShape}] is invalid for a tensor of ${n} elements`);
  }
  return out;
}

// Port of torch's computeStride (aten/src/ATen/TensorUtils.cpp): the strides of `newShape` as a view of
// (oldShape, oldStride), or null when no view exists. The dims of the old layout fall into chunks: runs of
// dims that are contiguous with one another (stride[d-1] == size[d] * stride[d]; size-1 dims join any run).
// A view may regroup the sizes inside a chunk, but no new dim may straddle two chunks.
export function computeStride(oldShape, oldStride, newShape) {
  if (oldShape.length === 0) return new Array(newShape.length).fill(1);
  const n = numel(oldShape);
  if (n === 0 && oldShape.length === newShape.length && oldShape.every((s, d) => s === newShape[d])) {
    return oldStride.slice();
  }
  const newStride = new Array(newShape.length);
  if (n === 0) return contiguousStrides(newShape); // no element: any strides do, torch picks these
  let viewD = newShape.length - 1;
  let chunkBaseStride = oldStride[oldStride.length - 1];
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let tensorD = oldShape.length - 1; tensorD >= 0; tensorD--) {
    tensorNumel *= oldShape[tensorD];
    // the end of a chunk: the next dim (to the left) does not continue this run
    if (tensorD === 0 || (oldShape[tensorD - 1] !== 1 && oldStride[tensorD - 1] !== tensorNumel * chunkBaseStride)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        newStride[viewD] = viewNumel * chunkBaseStride;
        viewNumel *= newShape[viewD];
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (tensorD > 0) {
        chunkBaseStride = oldStride[tensorD - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  return viewD === -1 ? newStride : null;
}

// The chunks computeStride sees, as lists of dims: the reason a view fails is a new dim across two of them.
export function chunks(shape, stride) {
  const out = [];
  let run = [];
  let base = stride[stride.length - 1];
  let count = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    run.unshift(d);
    count *= shape[d];
    if (d === 0 || (shape[d - 1] !== 1 && stride[d - 1] !== count * base)) {
      out.unshift(run);
      run = [];
      if (d > 0) {
        base = stride[d - 1];
        count = 1;
      }
    }
  }
  return out;
}

// view / reshape: {kind: "view", shape, stride, offset, why} or {kind: "copy", shape, why}; throws when the
// element counts disagree (neither works then).
export function viewOrCopy(layout, newShapeAsked, op = "view") {
  const { shape, stride, offset } = layout;
  const newShape = inferSize(newShapeAsked, numel(shape));
  const newStride = computeStride(shape, stride, newShape);
  if (newStride) {
    return { kind: "view", shape: newShape, stride: newStride, offset, why: `${op} returns a view: same storage` };
  }
  const groups = chunks(shape, stride)
    .map((g) => `(${g.map((d) => `dim ${d}`).join(", ")})`)
    .join(" + ");
  const why =
    `no view has shape [${newShape}]: the old dims fall into contiguous runs ${groups}, and a new dim would ` +
    "span two of them";
  if (op === "view") throw new Error(`view is impossible, ${why}; reshape would copy`);
  return { kind: "copy", shape: newShape, stride: contiguousStrides(newShape), why: `reshape must copy: ${why}` };
}

// The other operators, each as torch computes the result's metadata. Every one returns a view of the
// same storage, except contiguous() on a non-contiguous layout (a copy).
export function transpose({ shape, stride, offset }, d0, d1) {
  const n = shape.length;
  const a = wrapDim(d0, n);
  const b = wrapDim(d1, n);
  const s = shape.slice();
  const t = stride.slice();
  if (n > 0) {
    [s[a], s[b]] = [s[b], s[a]];
    [t[a], t[b]] = [t[b], t[a]];
  }
  return { shape: s, stride: t, offset };
}

export function permute({ shape, stride, offset }, dims) {
  const n = shape.length;
  if (dims.length !== n) throw new Error(`permute needs ${n} dims, one per dim of the tensor; got ${dims.length}`);
  const wrapped = dims.map((d) => wrapDim(d, n));
  if (new Set(wrapped).size !== n) throw new Error("permute: a dim is repeated");
  return { shape: wrapped.map((d) => shape[d]), stride: wrapped.map((d) => stride[d]), offset };
}

// t[..., start:stop:step] along `dim` (Python's slice rules: negative bounds count from the end, clamped).
export function slice({ shape, stride, offset }, dim, start, stop, step = 1) {
  if (shape.length === 0) throw new Error("a 0-d tensor cannot be sliced");
  const d = wrapDim(dim, shape.length);
  if (!isInt(step) || step <= 0) throw new Error("slice step must be positive");
  const size = shape[d];
  const clamp = (v, dflt) => {
    if (v === null || v === undefined) return dflt;
    const w = v < 0 ? v + size : v;
    return Math.min(Math.max(w, 0), size);
  };
  const a = clamp(start, 0);
  const b = Math.max(clamp(stop, size), a);
  const s = shape.slice();
  const t = stride.slice();
  s[d] = Math.floor((b - a + step - 1) / step);
  t[d] = stride[d] * step;
  return { shape: s, stride: t, offset: offset + a * stride[d] };
}

// torch's inferExpandGeometry: size-1 dims stretch with stride 0; new dims are added in front.
export function expand({ shape, stride, offset }, sizes) {
  const n = sizes.length;
  if (n < shape.length) {
    throw new Error(`expand needs at least ${shape.length} sizes (one per dim), got ${n}`);
  }
  const outShape = new Array(n);
  const outStride = new Array(n);
  for (let i = n - 1; i >= 0; i--) {
    const dim = shape.length - 1 - (n - 1 - i);
    let size = dim >= 0 ? shape[dim] : 1;
    let st = dim >= 0 ? stride[dim] : i === n - 1 ? 0 : outShape[i + 1] * outStride[i + 1]; // torch: 0 below a 0-d tensor
    let target = sizes[i];
    if (!isInt(target)) throw new Error(`expand: size ${target} is not an int`);
    if (target === -1) {
      if (dim < 0) throw new Error(`expand: -1 is not allowed for the new leading dim ${i}`);
      target = size;
    }
    if (target < 0) throw new Error(`expand: size ${target} is negative`);
    if (size !== target) {
      if (size !== 1) throw new Error(`expand: dim ${i} has size ${size}; only a size-1 dim can stretch to ${target}`);
      size = target;
      st = 0;
    }
    outShape[i] = size;
    outStride[i] = st;
  }
  return { shape: outShape, stride: outStride, offset };
}

export function unsqueeze({ shape, stride, offset }, dim) {
  const n = shape.length;
  if (!isInt(dim) || dim < -n - 1 || dim > n) throw new Error(`unsqueeze: dim ${dim} is out of range ${-n - 1}..${n}`);
  const d = dim < 0 ? dim + n + 1 : dim;
  const s = shape.slice();
  const t = stride.slice();
  s.splice(d, 0, 1);
  t.splice(d, 0, d >= n ? 1 : shape[d] * stride[d]);
  return { shape: s, stride: t, offset };
}

// unfold(dim, size, step): windows of `size` elements every `step` along dim, as a new last dim.
export function unfold({ shape, stride, offset }, dim, size, step) {
  const n = shape.length;
  const d = wrapDim(dim, n);
  const max = n === 0 ? 1 : shape[d];
  if (!isInt(size) || size < 0 || size > max) throw new Error(`unfold: size ${size} must be in 0..${max}`);
  if (!isInt(step) || step <= 0) throw new Error("unfold: step must be > 0");
  if (n === 0) return { shape: [size], stride: [1], offset };
  const s = shape.slice();
  const t = stride.slice();
  s[d] = Math.floor((shape[d] - size) / step) + 1;
  t[d] = stride[d] * step;
  s.push(size);
  t.push(stride[d]);
  return { shape: s, stride: t, offset };
}

export function asStrided(_layout, shape, stride, offset) {
  checkLayout(shape, stride, offset);
  return { shape: shape.slice(), stride: stride.slice(), offset };
}

// contiguous(): the same layout when already contiguous (torch returns the tensor itself), else a copy.
export function contiguous({ shape, stride, offset }) {
  if (isContiguous(shape, stride)) return { kind: "view", shape, stride, offset, why: "already contiguous: no copy" };
  return { kind: "copy", shape, stride: contiguousStrides(shape), why: "not contiguous: contiguous() copies" };
}

// ------------------------------------------------------------------------------------------------------------
// Drawing. Everything below reads the model (shape, stride, offset, size) and writes only shape, stride, offset.

const CSS = `
.vx{font:13px/1.35 system-ui,sans-serif;color:#1a1a1a;background:#fff;border:1px solid #bbb;border-radius:6px;
 padding:8px;max-width:100%;overflow-x:auto}
.vx fieldset{border:0;margin:0 0 6px;padding:0;display:flex;flex-wrap:wrap;gap:6px 12px;align-items:center}
.vx{color-scheme:light}.vx input,.vx button,.vx select{font:inherit;color:#111;background:#fff;border:1px solid #888;
 border-radius:3px}.vx input{width:8em}.vx input.n{width:4em}.vx button{background:#f0f0f0;cursor:pointer}
.vx h4,.vx label{color:#1a1a1a}
.vx .panes{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.vx .cells{display:flex;flex-wrap:wrap;gap:2px}.vx .grid{display:inline-grid;gap:2px;margin:0 8px 8px 0}
.vx .c{min-width:2.2em;height:2.2em;display:flex;align-items:center;justify-content:center;border:1px solid #555;
 border-radius:3px;font-variant-numeric:tabular-nums;position:relative;color:#111}
.vx .c.unread{background:#eee!important;color:#777;border-color:#ccc}
.vx .c.over{outline:3px solid #c00;outline-offset:-3px;font-weight:700}
.vx .c.oob{background:repeating-linear-gradient(45deg,#fdd,#fdd 4px,#fff 4px,#fff 8px)!important;
 border:2px dashed #c00;color:#900}
.vx .c.hot{box-shadow:0 0 0 3px #000}.vx .c:focus{box-shadow:0 0 0 3px #06c;outline:none}
.vx .c sup{position:absolute;top:0;right:2px;font-size:9px;color:#900}
.vx .c.off{border-bottom:5px solid #06c}.vx .msg{min-height:1.3em;margin:4px 0}.vx .err{color:#b00}
.vx .copy{color:#8a4b00}.vx .viewok{color:#07603a}.vx h4{margin:2px 0 4px;font-size:13px}
.vx .sub{font-size:11px;color:#555;margin:2px 0}`;

// A colour per storage element, the same in every view (golden-angle hues: neighbours differ).
export const colour = (i) => `hsl(${(i * 137.508) % 360} 70% 82%)`;

const fmt = (a) => `(${a.join(", ")}${a.length === 1 ? "," : ""})`;
const parseInts = (text) => {
  const s = text.trim().replace(/^[[(]|[\])]$/g, "");
  if (s === "") return [];
  const parts = s.split(/[\s,]+/).filter((p) => p !== "");
  const out = parts.map((p) => (/^-?\d+$/.test(p) ? Number(p) : NaN));
  if (out.some((v) => Number.isNaN(v))) throw new Error(`"${text}" is not a list of whole numbers`);
  return out;
};

// The layout in words, for the aria-live region (and anyone who prefers text).
export function describe(shape, stride, offset, size) {
  const a = analyse(shape, stride, offset, size);
  let text = `Shape ${fmt(shape)}, stride ${fmt(stride)}, storage offset ${offset}, over a storage of ${size} elements. `;
  if (!a.drawn) return `${text}${a.numel} elements: too many to draw.`;
  if (a.numel === 0) return `${text}The view has no elements and reads no storage.`;
  const lo = Math.min(...a.indices);
  const hi = Math.max(...a.indices);
  text += `Its ${a.numel} elements read storage elements ${lo} to ${hi}`;
  text += a.overlap ? `, some more than once (overlap: ${a.numel - a.reads.size} repeated reads). ` : ", each once. ";
  if (a.outside) text += `Out of bounds: ${a.outside} of its elements would read past the end of the storage. `;
  text += a.contiguous ? "Contiguous." : "Not contiguous.";
  return text;
}

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

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

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
  const reset = el("button", { type: "button", text: "Reset" });
  const opSel = el("select", { "aria-label": "operator", name: "op" });
  for (const name of Object.keys(OPS)) opSel.append(el("option", { value: name, text: name }));
  const argIn = el("input", { "aria-label": "operator arguments", name: "args" });
  const run = el("button", { type: "button", text: "Apply op" });
  const msg = el("div", { class: "msg", role: "status" });
  const live = el("div", { class: "sub", "aria-live": "polite" });
  const panes = el("div", { class: "panes" });
  const label = (text, input) => el("label", {}, `${text} `, input);
  box.append(
    el("fieldset", {}, label("shape", shapeIn), label("stride", strideIn), label("offset", offsetIn), apply, reset),
    el("fieldset", {}, label("op", opSel), label("args", argIn), run),
    msg,
    panes,
    live,
  );
  root.replaceChildren(box);

  const say = (text, cls = "") => {
    msg.textContent = text;
    msg.className = `msg ${cls}`;
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

  function draw() {
    const { shape, stride, offset } = get();
    const size = model.get("size");
    fill();
    try {
      checkLayout(shape, stride, offset); // the kernel may send shape and stride one message apart
    } catch (err) {
      say(`waiting for a whole layout: ${err.message}`, "err");
      return;
    }
    const a = analyse(shape, stride, offset, size);
    live.textContent = describe(shape, stride, offset, size);
    box.dataset.indices = JSON.stringify(a.indices); // for tests and anyone scripting the page
    panes.replaceChildren();
    const storagePane = el("div", { class: "pane storage" });
    storagePane.append(el("h4", { text: `storage (${size} elements; offset ${offset})` }));
    const strip = el("div", { class: "cells", role: "list", "aria-label": "storage elements" });
    const shown = Math.max(size, a.drawn ? Math.max(-1, ...a.indices) + 1 : 0);
    const cellsByIndex = new Map();
    for (let i = 0; i < Math.min(shown, MAX_DRAWN); i++) {
      const reads = a.reads.get(i) || 0;
      const cell = el("div", { class: "c", role: "listitem", text: String(i), "data-index": String(i) });
      cell.style.background = colour(i);
      cell.title = `storage element ${i}: read ${reads} time(s)`;
      if (i >= size) cell.classList.add("oob");
      else if (!reads) cell.classList.add("unread");
      if (reads > 1) {
        cell.classList.add("over");
        cell.append(el("sup", { text: `×${reads}` }));
      }
      if (i === offset) cell.classList.add("off");
      cellsByIndex.set(i, cell);
      strip.append(cell);
    }
    storagePane.append(strip);
    storagePane.append(
      el("div", { class: "sub", text: `the view starts at storage element ${offset} (the offset); grey: never read` }),
    );
    const gridPane = el("div", { class: "pane view" });
    gridPane.append(el("h4", { text: `view ${fmt(shape)}, stride ${fmt(stride)}` }));
    if (!a.drawn) {
      gridPane.append(el("div", { class: "err", text: `${a.numel} elements: too many to draw (at most ${MAX_DRAWN})` }));
    } else {
      drawGrids(gridPane, shape, a, size, cellsByIndex);
    }
    panes.append(gridPane, storagePane);
    if (!a.inBounds) {
      say(`out of bounds: the view needs ${a.needed} storage elements, the storage has ${size}`, "err");
    }
  }

  // The logical view: a 2-D grid per index of the leading dims (a row for 1-D, one cell for 0-d).
  function drawGrids(pane, shape, a, size, cellsByIndex) {
    const rows = shape.length >= 2 ? shape[shape.length - 2] : 1;
    const cols = shape.length >= 1 ? shape[shape.length - 1] : 1;
    const lead = shape.slice(0, Math.max(shape.length - 2, 0));
    const per = rows * cols;
    const count = numel(lead);
    if (a.numel === 0) pane.append(el("div", { class: "sub", text: "no elements" }));
    for (let g = 0; g < count && a.numel > 0; g++) {
      const leadIdx = [];
      let rest = g;
      for (let d = lead.length - 1; d >= 0; d--) {
        leadIdx.unshift(rest % lead[d]);
        rest = Math.floor(rest / lead[d]);
      }
      if (lead.length) pane.append(el("div", { class: "sub", text: `[${[...leadIdx, ":", ":"].join(", ")}]` }));
      const grid = el("div", { class: "grid", role: "grid", "aria-label": "elements of the view" });
      grid.style.gridTemplateColumns = `repeat(${cols}, auto)`;
      for (let r = 0; r < rows; r++) {
        const row = el("div", { role: "row", style: "display:contents" });
        for (let c = 0; c < cols; c++) {
          const at = a.indices[g * per + r * cols + c];
          const index = [...leadIdx, ...(shape.length >= 2 ? [r] : []), ...(shape.length >= 1 ? [c] : [])];
          const cell = el("div", { class: "c", role: "gridcell", tabindex: "0", text: String(at) });
          cell.dataset.storage = String(at);
          cell.style.background = colour(at);
          const reads = a.reads.get(at);
          let words = `element [${index.join(", ")}] reads storage element ${at}`;
          if (at >= size) {
            cell.classList.add("oob");
            words += ", out of bounds";
          } else if (reads > 1) {
            cell.classList.add("over");
            words += `, shared with ${reads - 1} other element(s)`;
          }
          cell.setAttribute("aria-label", words);
          cell.title = words;
          const hot = (on) => cellsByIndex.get(at)?.classList.toggle("hot", on);
          cell.addEventListener("focus", () => hot(true));
          cell.addEventListener("blur", () => hot(false));
          cell.addEventListener("mouseenter", () => hot(true));
          cell.addEventListener("mouseleave", () => hot(false));
          row.append(cell);
        }
        grid.append(row);
      }
      pane.append(grid);
    }
  }

  const applyTyped = () => {
    try {
      setLayout({ shape: parseInts(shapeIn.value), stride: parseInts(strideIn.value), offset: Number(offsetIn.value) });
      const a = analyse(get().shape, get().stride, get().offset, model.get("size"));
      if (a.inBounds) say(a.overlap ? "overlap: some storage elements are read more than once" : "layout applied");
    } catch (err) {
      say(err.message, "err");
    }
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
  for (const input of [shapeIn, strideIn, offsetIn]) {
    input.addEventListener("change", applyTyped);
    input.addEventListener("keydown", (e) => e.key === "Enter" && applyTyped());
  }
  apply.addEventListener("click", applyTyped);
  reset.addEventListener("click", () => {
    setLayout(start);
    say("back to the starting layout");
  });
  opSel.addEventListener("change", argHint);
  run.addEventListener("click", runOp);
  argIn.addEventListener("keydown", (e) => e.key === "Enter" && runOp());
  const redraw = () => quiet || draw();
  for (const key of ["shape", "stride", "offset", "size"]) model.on(`change:${key}`, redraw);
  argHint();
  draw();
  return () => {
    for (const key of ["shape", "stride", "offset", "size"]) model.off?.(`change:${key}`, redraw);
  };
}

export default { render };
