// The layout arithmetic of the stride explorer, written as torch computes it (checked against real torch
// over generated cases: tests/unit/test_explore.py). No DOM here: the other modules draw what this computes.
//
// A layout is {shape, stride, offset}: element (i0, i1, ...) of the view reads storage element
// offset + i0*stride[0] + i1*stride[1] + ...  (strides and offset count elements, not bytes).

export const MAX_DRAWN = 1024; // more cells than this would not fit a page: the explorer says so instead

export const _MAX_EXACT = Number.MAX_SAFE_INTEGER; // 2**53 - 1: the largest integer a page holds exactly
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
  // a page holds integers exactly up to 2**53 - 1 (torch: 2**63 - 1); past that an address would be rounded
  const big = [...shape, ...stride, offset, storageNeeded(shape, stride, offset)].some((v) => v > _MAX_EXACT);
  if (big) throw new Error(`every size, stride, offset and address must be at most ${_MAX_EXACT} (2**53 - 1)`);
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


// The address of one element, term by term: {terms: [[i, stride], ...], address}, so the page can show
// offset + i0·stride0 + i1·stride1 = address with the numbers of the element under the pointer.
export function addressOf(index, stride, offset) {
  const terms = index.map((i, d) => [i, stride[d]]);
  return { offset, terms, address: terms.reduce((acc, [i, s]) => acc + i * s, offset) };
}
