// The explorer's look: the palette, the colours of its marks, and its style sheet (one rule a line).
//
// The palette is viewlab.draw's (Okabe-Ito, colour-blind safe): storage element k has colour
// PALETTE[k % 7] here and in draw_layout's figure, which the notebooks show right above the explorer.
// tests/unit/test_explore_style.py checks that the two palettes agree and measures the WCAG contrast of
// every text and mark colour below against what it is drawn on (at least 4.5:1).

export const PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"];
export const UNREAD = "#DDDDDD"; // viewlab.draw's UNUSED: storage the view never reads

// Text on a palette colour: dark, except on the one blue too dark for it (white reaches 5.2:1 there).
export const INK = "#111111";
export const INK_ON_DARK = "#FFFFFF";
export const DARK_FILLS = ["#0072B2"];

// One colour per mark, all different, each at least 4.5:1 against the white box they are drawn on.
export const MARKS = {
  overlap: "#6A1B9A", // purple outline and the ×N count under a storage cell: read N times
  outside: "#B00020", // red dashed border on hatching: outside the storage (out of bounds)
  offset: "#0050A0", // blue bar under the storage cell where the view starts (the offset)
  pointer: "#000000", // black ring: the element under the pointer or the keyboard focus, and what it reads
};
export const HATCH = "#F4C7C3"; // the light stripe of the out-of-bounds hatching (text on it stays INK)
export const MUTED = "#333333"; // the number in a never-read cell, on UNREAD
export const SUBTLE = "#4D4D4D"; // small explanatory text, on white
export const WRONG = "#B00020"; // error messages
export const COPIES = "#8A4B00"; // "must copy" messages
export const FINE = "#07603A"; // "a view" messages

export const fillOf = (k) => PALETTE[k % PALETTE.length];
export const inkOn = (fill) => (DARK_FILLS.includes(fill) ? INK_ON_DARK : INK);

const hatching = `repeating-linear-gradient(45deg,${HATCH},${HATCH} 4px,#fff 4px,#fff 8px)`;

const RULES = [
  ".vx{font:13px/1.35 system-ui,sans-serif;color:#1a1a1a;background:#fff;color-scheme:light}",
  ".vx{border:1px solid #bbb;border-radius:6px;padding:8px;max-width:100%;overflow-x:auto}",
  ".vx fieldset{border:0;margin:0 0 6px;padding:0;display:flex;flex-wrap:wrap;gap:6px 12px;align-items:center}",
  ".vx input,.vx button,.vx select{font:inherit;color:#111;background:#fff;border:1px solid #888;border-radius:3px}",
  ".vx input{width:8em}",
  ".vx input.n{width:4em}",
  ".vx button{background:#f0f0f0;cursor:pointer}",
  ".vx button[aria-disabled=true]{background:#fff;color:#595959;border-style:dashed;cursor:default}",
  ".vx h4,.vx label{color:#1a1a1a}",
  ".vx h4{margin:2px 0 4px;font-size:13px}",
  ".vx .panes{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}",
  ".vx .pane{max-width:100%;overflow-x:auto}",
  ".vx .cells{display:flex;flex-wrap:wrap;gap:2px;align-items:flex-start}",
  ".vx .sc{display:flex;flex-direction:column;align-items:center}",
  `.vx .sc .idx,.vx .sc .n{font-size:11px;line-height:14px;min-height:14px;color:${SUBTLE}}`,
  `.vx .sc .n{color:${MARKS.overlap};font-weight:700}`,
  `.vx .gap{align-self:center;font-size:11px;color:${SUBTLE};padding:0 4px;white-space:nowrap}`,
  ".vx .grid{display:inline-grid;gap:2px;margin:0 8px 8px 0;align-items:center}",
  `.vx .grid .ax{font-size:11px;color:${SUBTLE};text-align:center;min-width:1.2em}`,
  ".vx .c{min-width:2.4em;height:2.4em;padding:0 2px;box-sizing:border-box;border:1px solid #555;border-radius:3px}",
  ".vx .c{display:flex;flex-direction:column;align-items:center;justify-content:center;position:relative}",
  ".vx .c{font-variant-numeric:tabular-nums;line-height:1.1}",
  ".vx .c small{font-size:10px}",
  `.vx .c.unread{background:${UNREAD}!important;color:${MUTED}!important;border-color:#aaa}`,
  `.vx .c.over{outline:3px solid ${MARKS.overlap};outline-offset:-3px;font-weight:700}`,
  `.vx .c.oob{background:${hatching}!important;border:2px dashed ${MARKS.outside};color:${INK}!important}`,
  `.vx .c.off{border-bottom:5px solid ${MARKS.offset}}`,
  `.vx .c.hot{box-shadow:0 0 0 3px ${MARKS.pointer}}`,
  `.vx .c:focus{box-shadow:0 0 0 3px ${MARKS.pointer},0 0 0 5px #fff,0 0 0 7px ${MARKS.offset};outline:none}`,
  ".vx .msg{min-height:1.3em;margin:4px 0}",
  `.vx .err{color:${WRONG}}`,
  `.vx .copy{color:${COPIES}}`,
  `.vx .viewok{color:${FINE}}`,
  `.vx .sub{font-size:11px;color:${SUBTLE};margin:2px 0}`,
  `.vx .trunc{font-size:12px;color:${WRONG};margin:2px 0}`,
  ".vx .arith{min-height:2.8em;margin:4px 0;font-variant-numeric:tabular-nums}",
  ".vx .legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0 0;padding:0;list-style:none;font-size:12px}",
  ".vx .legend li{display:flex;align-items:center;gap:5px}",
  ".vx .legend .c{min-width:1.6em;height:1.6em;font-size:11px}",
];

export const CSS = RULES.join("\n");
