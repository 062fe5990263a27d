/**
 * Pictures on canvases: raw camera images (mono8, rgb8, rgba8, sized by the channel's schema) and a cell
 * world drawn from its JSON (`avatar`, `goal`), for worlds without a camera.
 */

const CHANNELS = { mono8: 1, rgb8: 3, rgba8: 4 };

/** Draws an `image/raw` payload; returns why it could not (or null). */
export function drawImage(canvas, schema, bytes) {
  const w = schema.width;
  const h = schema.height;
  const channels = CHANNELS[schema.encoding];
  if (!(w > 0 && h > 0) || channels === undefined || bytes.length < w * h * channels)
    return `${schema.encoding ?? 'unknown'} encoding not drawn`;
  if (canvas.width !== w) [canvas.width, canvas.height] = [w, h];
  const ctx = canvas.getContext('2d');
  const img = ctx.createImageData(w, h);
  const d = img.data;
  for (let i = 0, j = 0; i < w * h; i++, j += channels) {
    const o = i * 4;
    d[o] = bytes[j];
    d[o + 1] = bytes[channels === 1 ? j : j + 1];
    d[o + 2] = bytes[channels === 1 ? j : j + 2];
    d[o + 3] = channels === 4 ? bytes[j + 3] : 255;
  }
  ctx.putImageData(img, 0, 0);
  return null;
}

/** A `cols` × `rows` grid (y up) with the goal as a square and the avatar as a disc. */
export function drawGrid(canvas, [cols, rows], v) {
  const ctx = canvas.getContext('2d');
  const W = canvas.width;
  const cell = Math.floor(W / Math.max(cols, rows));
  ctx.fillStyle = '#f4f1ea';
  ctx.fillRect(0, 0, W, W);
  ctx.strokeStyle = '#b8b2a7';
  for (let x = 0; x < cols; x++)
    for (let y = 0; y < rows; y++) ctx.strokeRect(x * cell, (rows - 1 - y) * cell, cell, cell);
  const at = ([x, y]) => [x * cell + cell / 2, (rows - 1 - y) * cell + cell / 2];
  if (Array.isArray(v.goal)) {
    const [gx, gy] = at(v.goal);
    ctx.fillStyle = '#17bebb';
    ctx.fillRect(gx - cell / 3, gy - cell / 3, (2 * cell) / 3, (2 * cell) / 3);
  }
  const [ax, ay] = at(v.avatar);
  ctx.fillStyle = '#e4572e';
  ctx.beginPath();
  ctx.arc(ax, ay, cell / 3, 0, 2 * Math.PI);
  ctx.fill();
}
