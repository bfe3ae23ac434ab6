// Moving around the view from the keyboard, as the ARIA grid pattern asks: the whole view is one Tab
// stop (a roving tabindex: one cell has tabindex 0, every other -1), and inside it
//   ArrowLeft / ArrowRight   move along a row,
//   ArrowUp / ArrowDown      move across rows, and on into the next or previous [i, :, :] grid,
//   Home / End               go to the ends of the row,
//   PageUp / PageDown        go to the same cell of the previous or next grid,
//   Ctrl+Home / Ctrl+End     go to the first or last element.

// The cell `key` leads to from flat position k (row-major over every grid), or k itself at an edge.
export function nextCell(key, k, { rows, cols, count }, ctrl = false) {
  const n = rows * cols * count;
  const c = k % cols;
  const moves = {
    ArrowRight: c + 1 < cols ? k + 1 : k,
    ArrowLeft: c > 0 ? k - 1 : k,
    ArrowDown: k + cols < n ? k + cols : k,
    ArrowUp: k - cols >= 0 ? k - cols : k,
    Home: ctrl ? 0 : k - c,
    End: ctrl ? n - 1 : k - c + cols - 1,
    PageDown: k + rows * cols < n ? k + rows * cols : k,
    PageUp: k - rows * cols >= 0 ? k - rows * cols : k,
  };
  return key in moves ? moves[key] : null;
}

// Make `cells` (the view's cells, in flat order) one Tab stop with arrow keys; `start` has tabindex 0.
// `moved(k)` is told each time the current cell changes, so a redraw can keep the place.
export function roving(cells, dims, start, moved) {
  let current = Math.min(Math.max(start, 0), cells.length - 1);
  cells.forEach((cell, k) => {
    cell.tabIndex = k === current ? 0 : -1;
    cell.addEventListener("focus", () => {
      cells[current].tabIndex = -1;
      current = k;
      cell.tabIndex = 0;
      moved(k);
    });
    cell.addEventListener("keydown", (e) => {
      const to = nextCell(e.key, current, dims, e.ctrlKey || e.metaKey);
      if (to === null) return;
      e.preventDefault();
      cells[to].focus();
    });
  });
}
