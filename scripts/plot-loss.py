#!/usr/bin/env python3
"""Plots the training and validation loss of a `llamac train --log FILE` log as a PNG.

    scripts/plot-loss.py train.log docs/training-loss.png [--title TEXT]

Only the Python standard library is used (the PNG is drawn pixel by pixel
with a built-in 5x7 font and written with zlib), so it runs on a bare
machine. The log is tab-separated with a header: step, tokens, seconds, lr,
loss, val_loss (empty where no validation ran). Drawn: the loss of every
update (light), its centred moving average, and the validation loss (a row
without a training loss, e.g. step 0, carries only a validation loss).
"""
import argparse
import math
import struct
import sys
import zlib

# 5x7 glyphs, one string of 7 rows per character, '#' = ink.
FONT = {
    ' ': ['.....'] * 7,
    '0': ['.###.', '#...#', '#..##', '#.#.#', '##..#', '#...#', '.###.'],
    '1': ['..#..', '.##..', '..#..', '..#..', '..#..', '..#..', '.###.'],
    '2': ['.###.', '#...#', '....#', '...#.', '..#..', '.#...', '#####'],
    '3': ['#####', '...#.', '..#..', '...#.', '....#', '#...#', '.###.'],
    '4': ['...#.', '..##.', '.#.#.', '#..#.', '#####', '...#.', '...#.'],
    '5': ['#####', '#....', '####.', '....#', '....#', '#...#', '.###.'],
    '6': ['..##.', '.#...', '#....', '####.', '#...#', '#...#', '.###.'],
    '7': ['#####', '....#', '...#.', '..#..', '.#...', '.#...', '.#...'],
    '8': ['.###.', '#...#', '#...#', '.###.', '#...#', '#...#', '.###.'],
    '9': ['.###.', '#...#', '#...#', '.####', '....#', '...#.', '.##..'],
    '.': ['.....', '.....', '.....', '.....', '.....', '.##..', '.##..'],
    ',': ['.....', '.....', '.....', '.....', '.##..', '..#..', '.#...'],
    '-': ['.....', '.....', '.....', '#####', '.....', '.....', '.....'],
    ':': ['.....', '.##..', '.##..', '.....', '.##..', '.##..', '.....'],
    '(': ['...#.', '..#..', '.#...', '.#...', '.#...', '..#..', '...#.'],
    ')': ['.#...', '..#..', '...#.', '...#.', '...#.', '..#..', '.#...'],
    '/': ['.....', '....#', '...#.', '..#..', '.#...', '#....', '.....'],
    '=': ['.....', '.....', '#####', '.....', '#####', '.....', '.....'],
    'a': ['.....', '.....', '.###.', '....#', '.####', '#...#', '.####'],
    'b': ['#....', '#....', '#.##.', '##..#', '#...#', '#...#', '####.'],
    'c': ['.....', '.....', '.###.', '#....', '#....', '#...#', '.###.'],
    'd': ['....#', '....#', '.##.#', '#..##', '#...#', '#...#', '.####'],
    'e': ['.....', '.....', '.###.', '#...#', '#####', '#....', '.###.'],
    'f': ['..##.', '.#..#', '.#...', '###..', '.#...', '.#...', '.#...'],
    'g': ['.....', '.####', '#...#', '#...#', '.####', '....#', '.###.'],
    'h': ['#....', '#....', '#.##.', '##..#', '#...#', '#...#', '#...#'],
    'i': ['..#..', '.....', '.##..', '..#..', '..#..', '..#..', '.###.'],
    'j': ['...#.', '.....', '..##.', '...#.', '...#.', '#..#.', '.##..'],
    'k': ['#....', '#....', '#..#.', '#.#..', '##...', '#.#..', '#..#.'],
    'l': ['.##..', '..#..', '..#..', '..#..', '..#..', '..#..', '.###.'],
    'm': ['.....', '.....', '##.#.', '#.#.#', '#.#.#', '#...#', '#...#'],
    'n': ['.....', '.....', '#.##.', '##..#', '#...#', '#...#', '#...#'],
    'o': ['.....', '.....', '.###.', '#...#', '#...#', '#...#', '.###.'],
    'p': ['.....', '.....', '####.', '#...#', '####.', '#....', '#....'],
    'q': ['.....', '.....', '.##.#', '#..##', '.####', '....#', '....#'],
    'r': ['.....', '.....', '#.##.', '##..#', '#....', '#....', '#....'],
    's': ['.....', '.....', '.###.', '#....', '.###.', '....#', '####.'],
    't': ['.#...', '.#...', '###..', '.#...', '.#...', '.#..#', '..##.'],
    'u': ['.....', '.....', '#...#', '#...#', '#...#', '#..##', '.##.#'],
    'v': ['.....', '.....', '#...#', '#...#', '#...#', '.#.#.', '..#..'],
    'w': ['.....', '.....', '#...#', '#...#', '#.#.#', '#.#.#', '.#.#.'],
    'x': ['.....', '.....', '#...#', '.#.#.', '..#..', '.#.#.', '#...#'],
    '%': ['##...', '##..#', '...#.', '..#..', '.#...', '#..##', '...##'],
    '+': ['.....', '..#..', '..#..', '#####', '..#..', '..#..', '.....'],
    'y': ['.....', '.....', '#...#', '#...#', '.####', '....#', '.###.'],
    'z': ['.....', '.....', '#####', '...#.', '..#..', '.#...', '#####'],
    'A': ['.###.', '#...#', '#...#', '#####', '#...#', '#...#', '#...#'],
    'B': ['####.', '#...#', '#...#', '####.', '#...#', '#...#', '####.'],
    'C': ['.###.', '#...#', '#....', '#....', '#....', '#...#', '.###.'],
    'D': ['###..', '#..#.', '#...#', '#...#', '#...#', '#..#.', '###..'],
    'E': ['#####', '#....', '#....', '####.', '#....', '#....', '#####'],
    'F': ['#####', '#....', '#....', '####.', '#....', '#....', '#....'],
    'G': ['.###.', '#...#', '#....', '#.###', '#...#', '#...#', '.####'],
    'H': ['#...#', '#...#', '#...#', '#####', '#...#', '#...#', '#...#'],
    'I': ['.###.', '..#..', '..#..', '..#..', '..#..', '..#..', '.###.'],
    'J': ['..###', '...#.', '...#.', '...#.', '...#.', '#..#.', '.##..'],
    'K': ['#...#', '#..#.', '#.#..', '##...', '#.#..', '#..#.', '#...#'],
    'L': ['#....', '#....', '#....', '#....', '#....', '#....', '#####'],
    'M': ['#...#', '##.##', '#.#.#', '#.#.#', '#...#', '#...#', '#...#'],
    'N': ['#...#', '#...#', '##..#', '#.#.#', '#..##', '#...#', '#...#'],
    'O': ['.###.', '#...#', '#...#', '#...#', '#...#', '#...#', '.###.'],
    'P': ['####.', '#...#', '#...#', '####.', '#....', '#....', '#....'],
    'Q': ['.###.', '#...#', '#...#', '#...#', '#.#.#', '#..#.', '.##.#'],
    'R': ['####.', '#...#', '#...#', '####.', '#.#..', '#..#.', '#...#'],
    'S': ['.####', '#....', '#....', '.###.', '....#', '....#', '####.'],
    'T': ['#####', '..#..', '..#..', '..#..', '..#..', '..#..', '..#..'],
    'U': ['#...#', '#...#', '#...#', '#...#', '#...#', '#...#', '.###.'],
    'V': ['#...#', '#...#', '#...#', '#...#', '#...#', '.#.#.', '..#..'],
    'W': ['#...#', '#...#', '#...#', '#.#.#', '#.#.#', '#.#.#', '.#.#.'],
    'X': ['#...#', '#...#', '.#.#.', '..#..', '.#.#.', '#...#', '#...#'],
    'Y': ['#...#', '#...#', '.#.#.', '..#..', '..#..', '..#..', '..#..'],
    'Z': ['#####', '....#', '...#.', '..#..', '.#...', '#....', '#####'],
}

WHITE, BLACK, GRID = (255, 255, 255), (40, 40, 40), (225, 225, 225)
RAW, SMOOTH, VALID = (170, 195, 230), (31, 90, 180), (220, 110, 20)


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(WHITE * (w * h))

    def set(self, x, y, color):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(color)

    def rect(self, x0, y0, x1, y1, color):
        for y in range(max(0, y0), min(self.h, y1 + 1)):
            for x in range(max(0, x0), min(self.w, x1 + 1)):
                self.set(x, y, color)

    def line(self, x0, y0, x1, y1, color, width=1):
        # Bresenham with a square pen
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        r = (width - 1) // 2
        while True:
            self.rect(x0 - r, y0 - r, x0 - r + width - 1, y0 - r + width - 1, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, color=BLACK, scale=2):
        """Draws s with its top-left corner at (x, y); returns its width."""
        for k, ch in enumerate(s):
            glyph = FONT.get(ch, FONT[' '])
            for gy, row in enumerate(glyph):
                for gx, c in enumerate(row):
                    if c == '#':
                        ox = x + k * 6 * scale + gx * scale
                        self.rect(ox, y + gy * scale, ox + scale - 1, y + gy * scale + scale - 1, color)
        return len(s) * 6 * scale

    def png(self):
        raw = b''.join(b'\x00' + bytes(self.px[3 * y * self.w:3 * (y + 1) * self.w]) for y in range(self.h))

        def chunk(tag, data):
            return struct.pack('>I', len(data)) + tag + data + struct.pack('>I', zlib.crc32(tag + data) & 0xffffffff)

        return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))


def nice_ticks(lo, hi, n=6):
    """About n round numbers covering [lo, hi]."""
    span = hi - lo if hi > lo else 1.0
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 2.5, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    t = math.ceil(lo / step) * step
    ticks = []
    while t <= hi + step * 1e-9:
        ticks.append(t)
        t += step
    return ticks, step


def fmt_tick(v, step):
    digits = max(0, -int(math.floor(math.log10(step)))) if step < 1 else 0
    return f'{v:.{digits}f}'


def read_log(path):
    rows = []
    with open(path) as f:
        header = f.readline().rstrip('\n').split('\t')
        col = {name: i for i, name in enumerate(header)}
        for name in ('step', 'tokens', 'loss', 'val_loss'):
            if name not in col:
                sys.exit(f'{path}: no column {name!r} (expected a `llamac train --log` file)')
        for line in f:
            parts = line.rstrip('\n').split('\t')
            if len(parts) < len(header):
                continue
            loss, val = parts[col['loss']], parts[col['val_loss']]
            rows.append((int(parts[col['step']]), float(parts[col['tokens']]), float(loss) if loss else None,
                         float(val) if val else None))
    # a resumed run appends: keep the last entry of each step
    by_step = {r[0]: r for r in rows}
    return [by_step[s] for s in sorted(by_step)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('log')
    ap.add_argument('png')
    ap.add_argument('--title', default='llamac train: loss')
    args = ap.parse_args()
    rows = read_log(args.log)

    W, H = 960, 560
    left, right, top, bottom = 90, 30, 70, 70
    c = Canvas(W, H)
    millions = rows[-1][1] >= 1e6
    scale = 1e6 if millions else 1e3
    val = [(r[1] / scale, r[3]) for r in rows if r[3] is not None]
    rows = [r for r in rows if r[2] is not None]
    if not rows:
        sys.exit(f'{args.log}: no training steps')
    xs = [r[1] / scale for r in rows]
    train = [r[2] for r in rows]
    # centred moving average (no lag), narrower near the ends
    half = max(2, len(rows) // 100)
    smooth = []
    for i in range(len(train)):
        h = min(half, i, len(train) - 1 - i)
        window = train[i - h:i + h + 1]
        smooth.append(sum(window) / len(window))

    # y range: from below the lowest curve to a little above the smoothed start
    ys = smooth + [v for _, v in val]
    y_lo, y_hi = min(ys + train), max(ys)
    pad = 0.05 * (y_hi - y_lo if y_hi > y_lo else 1.0)
    y_lo, y_hi = y_lo - pad, y_hi + pad
    x_lo, x_hi = 0.0, xs[-1] if xs[-1] > 0 else 1.0
    pw, ph = W - left - right, H - top - bottom

    def px(x):
        return left + int(round((x - x_lo) / (x_hi - x_lo) * pw))

    def py(y):
        y = min(max(y, y_lo), y_hi)
        return top + int(round((y_hi - y) / (y_hi - y_lo) * ph))

    xt, xstep = nice_ticks(x_lo, x_hi)
    yt, ystep = nice_ticks(y_lo, y_hi)
    for t in xt:
        c.line(px(t), top, px(t), top + ph, GRID)
        label = fmt_tick(t, xstep)
        c.text(px(t) - len(label) * 6, top + ph + 10, label)
    for t in yt:
        c.line(left, py(t), left + pw, py(t), GRID)
        label = fmt_tick(t, ystep)
        c.text(left - 12 - len(label) * 12, py(t) - 7, label)
    c.line(left, top, left, top + ph, BLACK)
    c.line(left, top + ph, left + pw, top + ph, BLACK)

    for i in range(1, len(xs)):
        c.line(px(xs[i - 1]), py(train[i - 1]), px(xs[i]), py(train[i]), RAW)
    for i in range(1, len(xs)):
        c.line(px(xs[i - 1]), py(smooth[i - 1]), px(xs[i]), py(smooth[i]), SMOOTH, 3)
    for i, (x, v) in enumerate(val):
        if i:
            c.line(px(val[i - 1][0]), py(val[i - 1][1]), px(x), py(v), VALID, 3)
        c.rect(px(x) - 3, py(v) - 3, px(x) + 3, py(v) + 3, VALID)

    c.text(left, 20, args.title, scale=3)
    unit = 'millions' if millions else 'thousands'
    c.text(left + pw // 2 - 180, H - 30, f'training tokens ({unit})')
    c.text(left - 80, top - 26, 'loss (nats/token)')
    # legend, top right
    lx, ly = left + pw - 330, top + 12
    last_val = f' {val[-1][1]:.3f}' if val else ''
    for color, label in ((RAW, 'train loss per update'), (SMOOTH, f'train, smoothed {smooth[-1]:.3f}'),
                         (VALID, 'validation' + last_val)):
        if color is VALID and not val:
            continue
        c.rect(lx, ly + 4, lx + 24, ly + 8, color)
        c.text(lx + 34, ly, label)
        ly += 24
    with open(args.png, 'wb') as f:
        f.write(c.png())


if __name__ == '__main__':
    main()
