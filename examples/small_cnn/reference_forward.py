#!/usr/bin/env python3
"""small_cnn's forward pass in plain Python (no PyTorch, no numpy), written from PyTorch's definitions of
each layer (Conv2d, BatchNorm2d in evaluation, MaxPool2d, LeakyReLU, a mean over H and W, Linear,
softmax), reading the safetensors file by hand: a check of the file's layouts and names that needs
nothing installed, for machines without PyTorch (pytorch_compare.py is the real thing).

  reference_forward.py MODEL PROBS DATA_DIR [N]
      MODEL  small_cnn.safetensors; PROBS  small_cnn_test_probs.bin (ctnn's probabilities, float32
      [count][10]); DATA_DIR holds t10k-images-idx3-ubyte (raw or .gz); N test images (default 100;
      about 0.25 s each). Prints how many predicted classes agree and the largest probability
      difference; exit status 0 when every class agrees.
"""
import gzip
import json
import math
import os
import struct
import sys

path, probs_path, data = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 100
f = open(path, 'rb'); hl = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(hl)); base = 8 + hl
meta = h.pop('__metadata__'); mean, std = float(meta['mean']), float(meta['std'])
T = {}
for k, v in h.items():
    f.seek(base + v['data_offsets'][0]); raw = f.read(v['data_offsets'][1] - v['data_offsets'][0])
    T[k] = list(struct.unpack('<%d%s' % (len(raw) // (4 if v['dtype'] == 'F32' else 8), 'f' if v['dtype'] == 'F32' else 'q'), raw))
def conv(x, C, H, W, p, O, s, pad):  # x[c][y][x] flat lists
    w, b = T[p + '.weight'], T[p + '.bias']
    OH, OW = (H + 2 * pad - 3) // s + 1, (W + 2 * pad - 3) // s + 1
    out = [[[b[o]] * OW for _ in range(OH)] for o in range(O)]
    for o in range(O):
        for i in range(C):
            for ky in range(3):
                for kx in range(3):
                    wv = w[((o * C + i) * 3 + ky) * 3 + kx]; xi = x[i]; oo = out[o]
                    for oy in range(OH):
                        iy = oy * s - pad + ky
                        if iy < 0 or iy >= H: continue
                        row = xi[iy]; orow = oo[oy]
                        for ox in range(OW):
                            ix = ox * s - pad + kx
                            if 0 <= ix < W: orow[ox] += wv * row[ix]
    return out, OH, OW
def bn(x, p):
    w, b, rm, rv = T[p + '.weight'], T[p + '.bias'], T[p + '.running_mean'], T[p + '.running_var']
    return [[[(v - rm[c]) / math.sqrt(rv[c] + 1e-5) * w[c] + b[c] for v in row] for row in x[c]] for c in range(len(x))]
relu = lambda x: [[[max(v, 0.0) for v in row] for row in ch] for ch in x]
leaky = lambda x: [[[v if v > 0 else 0.01 * v for v in row] for row in ch] for ch in x]
def pool(x, H, W):
    return [[[max(ch[2 * y][2 * xx], ch[2 * y][2 * xx + 1], ch[2 * y + 1][2 * xx], ch[2 * y + 1][2 * xx + 1]) for xx in range(W // 2)] for y in range(H // 2)] for ch in x]
raw_path = os.path.join(data, 't10k-images-idx3-ubyte')
imgs = (open(raw_path, 'rb').read() if os.path.exists(raw_path) else gzip.open(raw_path + '.gz', 'rb').read())[16:]
theirs = struct.unpack('<%df' % (10 * n), open(probs_path, 'rb').read(40 * n))
agree, worst = 0, 0.0
for k in range(n):
    px = imgs[k * 784:(k + 1) * 784]
    x = [[[(px[y * 28 + xx] / 255.0 - mean) / std for xx in range(28)] for y in range(28)]]
    x, H, W = conv(x, 1, 28, 28, 'layers.0', 16, 1, 1); x = relu(bn(x, 'layers.1')); x = pool(x, H, W); H, W = 14, 14
    r, _, _ = conv(x, 16, H, W, 'layers.4.0', 16, 1, 1); r = relu(bn(r, 'layers.4.1'))
    r, _, _ = conv(r, 16, H, W, 'layers.4.3', 16, 1, 1); r = bn(r, 'layers.4.4')
    x = relu([[[a + b for a, b in zip(ra, rb)] for ra, rb in zip(ca, cb)] for ca, cb in zip(x, r)])
    x, H, W = conv(x, 16, H, W, 'layers.6', 32, 2, 1); x = leaky(bn(x, 'layers.7'))
    g = [sum(sum(row) for row in ch) / (H * W) for ch in x]
    z = [T['layers.11.bias'][o] + sum(T['layers.11.weight'][o * 32 + i] * g[i] for i in range(32)) for o in range(10)]
    m = max(z); e = [math.exp(v - m) for v in z]; s = sum(e)
    p = [v / s for v in e]
    q = theirs[10 * k:10 * k + 10]
    agree += p.index(max(p)) == q.index(max(q))
    worst = max(worst, max(abs(a - b) for a, b in zip(p, q)))
print(f'plain Python (PyTorch layer definitions): same class as ctnn for {agree} of {n} test images, '
      f'largest probability difference {worst:.3g}')
sys.exit(0 if agree == n else 1)
