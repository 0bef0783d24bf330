#!/usr/bin/env python3
"""PyTorch reference benchmark: LeNet-5 on MNIST (for comparison with ctnn).

Model (PyTorch default init, 61,706 parameters, FP32, TF32 disabled):
  Conv2d(1,6,5,pad=2) ReLU MaxPool2d(2) Conv2d(6,16,5) ReLU MaxPool2d(2)
  Flatten Linear(400,120) ReLU Linear(120,84) ReLU Linear(84,10)
Loss: cross-entropy on logits.  Optimiser: SGD, momentum 0.9, lr --lr.

Data: raw (uncompressed) MNIST IDX files in --data, parsed with numpy.  The
whole training set is uploaded to the device once as uint8.  Each epoch draws a
random permutation on the device (torch.randperm with a seeded device
generator); each step gathers its batch on the device and normalises it there:
((x/255 - 0.1307)/0.3081).  An epoch is all 60,000 images, the last partial
batch included.

Training, for each batch size in --batches and each mode:
  eager  plain PyTorch loop (zero_grad, forward, loss, backward, step).
  graph  the whole step (index + gather + normalise + forward + loss + backward
         + SGD step) captured as one CUDA graph, following PyTorch's "whole
         network capture" recipe (side-stream warm-up, zero_grad(set_to_none)
         before capture).  The batch indices come from a static permutation
         buffer and a device step counter that the graph advances itself, so
         an epoch is one randperm copy plus graph replays only.  The last
         partial batch has its own (second) captured graph.  Parameters and
         momentum buffers are restored after the capture warm-up, so graph mode
         trains from the same initial state and batch order as eager mode.
  Each model is fresh (same seed), gets 1 warm-up epoch, then --epochs timed
  epochs, each timed with CUDA events around the whole epoch (one sync at the
  end of the epoch, no .item() inside); the median is reported (epoch_s), then
  the test accuracy in percent on the 10k test images (test_acc).

Inference (fresh model, eval mode, no_grad, test set pre-normalised on device):
  infer_img_s  images/s for one pass over the 10k test set in chunks of
               --infer-batch (default 10000) and of 1024; median of 20 passes
               after warm-up, timed with CUDA events.  graph mode captures the
               whole pass (all chunks) as one CUDA graph.
  latency_us   batch-1 forward latency, median of 1000 single-image forwards,
               host wall clock from issue to torch.cuda.synchronize() return;
               graph mode = copy into a static input + replay of a captured
               batch-1 forward graph.

Output: a human-readable table plus one machine-readable line per measurement:
  RESULT framework=pytorch mode=<eager|graph> batch=<B> metric=<m> value=<v>
with m in epoch_s, test_acc, infer_img_s, latency_us.

--quick: 1 timed epoch over the first 2048 training images, 3 inference passes,
100 latency iterations (smoke test).  --device cpu runs eager mode only
(perf_counter timing instead of CUDA events).
"""
import argparse
import gzip
import os
import statistics
import struct
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.1307, 0.3081
N_PARAMS = 61706


def read_idx(path, magic):
    """Read an IDX file (or PATH.gz if only that exists); check magic and size."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    (m,) = struct.unpack(">I", raw[:4])
    if m != magic:
        raise ValueError(f"{path}: bad magic 0x{m:08x}, expected 0x{magic:08x}")
    ndim = m & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load_mnist(d, split):
    x = read_idx(os.path.join(d, f"{split}-images-idx3-ubyte"), 0x00000803)
    y = read_idx(os.path.join(d, f"{split}-labels-idx1-ubyte"), 0x00000801)
    if len(x) != len(y) or x.shape[1:] != (28, 28) or y.max() > 9:
        raise ValueError(f"{d}: inconsistent {split} files")
    return x, y


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def normalise(x_u8):
    return x_u8.float().div_(255.0).sub_(MEAN).div_(STD)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(fn, dev):
    """Seconds taken by fn(): CUDA events on a GPU, perf_counter on the CPU."""
    if dev.type != "cuda":
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def capture(fn, before=lambda: None, warmup=3):
    """Side-stream warm-up, then capture fn() into a CUDA graph (PyTorch recipe)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            before()
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    before()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def make_epoch(mode, model, opt, tx, ty, batch, gen, dev):
    """Return a function that runs one training epoch without synchronising."""
    n = tx.shape[0]
    n_full, tail = divmod(n, batch)

    def step(idx):
        x = normalise(tx.index_select(0, idx))
        loss = F.cross_entropy(model(x), ty.index_select(0, idx))
        loss.backward()
        opt.step()
        return loss

    if mode == "eager":
        def epoch():
            perm = torch.randperm(n, device=dev, generator=gen)
            for s in range(0, n, batch):
                opt.zero_grad(set_to_none=True)
                step(perm[s:s + batch])
        return epoch

    # graph mode: static permutation + device step counter advanced by the graph
    perm = torch.arange(n, device=dev)
    counter = torch.zeros((), dtype=torch.long, device=dev)
    ar = torch.arange(batch, device=dev)
    init = [p.detach().clone() for p in model.parameters()]

    def full_step():
        loss = step(perm.index_select(0, torch.add(ar, counter, alpha=batch)))
        counter.add_(1)
        return loss

    def before():  # recipe: grads to None before capture; warm-up stays in range
        opt.zero_grad(set_to_none=True)
        counter.zero_()

    graphs = [capture(full_step, before)[0]] if n_full else []
    g_tail = capture(lambda: step(perm[n_full * batch:]), before)[0] if tail else None
    with torch.no_grad():  # undo the warm-up steps: same start state as eager
        for p, p0 in zip(model.parameters(), init):
            p.copy_(p0)
        for st in opt.state.values():
            if st.get("momentum_buffer") is not None:
                st["momentum_buffer"].zero_()  # 0.9*0 + g == a fresh first step

    def epoch():
        perm.copy_(torch.randperm(n, device=dev, generator=gen))
        counter.zero_()
        for _ in range(n_full):
            graphs[0].replay()
        if g_tail is not None:
            g_tail.replay()
    # A graph reads its inputs by address: keep every static tensor it uses alive
    # (ar would otherwise be freed and its memory reused once we return).
    epoch.keep_alive = (perm, counter, ar, tx, ty, model, opt)
    return epoch


@torch.no_grad()
def accuracy(model, xf, y, chunk=10000):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=xf.device)
    for s in range(0, xf.shape[0], chunk):
        correct += (model(xf[s:s + chunk]).argmax(1) == y[s:s + chunk]).sum()
    model.train()
    return 100.0 * correct.item() / xf.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=".data/mnist", help="dir with raw MNIST IDX files")
    ap.add_argument("--batches", default="64,256,1024", help="comma-separated batch sizes")
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs (after 1 warm-up)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="eager,graph", help="subset of eager,graph")
    ap.add_argument("--infer-batch", type=int, default=10000)
    ap.add_argument("--infer-runs", type=int, default=20)
    ap.add_argument("--latency-iters", type=int, default=1000)
    ap.add_argument("--limit", type=int, default=0, help="train images per epoch (0: all)")
    ap.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.backends.cudnn.benchmark (default on: fastest PyTorch)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 epoch on 2048 images")
    a = ap.parse_args()
    if a.quick:
        a.epochs, a.limit = 1, a.limit or 2048
        a.infer_runs, a.latency_iters = 3, 100
    dev = torch.device(a.device)
    modes = [m for m in a.modes.split(",") if m]
    if dev.type != "cuda" and "graph" in modes:
        print("NOTE graph mode needs CUDA: skipped")
        modes = [m for m in modes if m != "graph"]

    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    with warnings.catch_warnings():  # legacy setters: consistent on all torch versions
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f'DEVICE name="{name}"')
    print(f"TORCH version={torch.__version__} cuda={torch.version.cuda} "
          f"cudnn={torch.backends.cudnn.version()}")
    print(f"CONFIG cudnn_benchmark={int(a.cudnn_benchmark)} tf32_matmul={int(tf32[0])} "
          f"tf32_cudnn={int(tf32[1])} dtype=fp32 lr={a.lr} momentum={a.momentum} seed={a.seed}")

    trx, try_ = load_mnist(a.data, "train")
    tex, tey = load_mnist(a.data, "t10k")
    if a.limit:
        trx, try_ = trx[:a.limit], try_[:a.limit]
    tx = torch.from_numpy(trx.copy()).unsqueeze(1).to(dev)  # uint8 [N,1,28,28]
    ty = torch.from_numpy(try_.astype(np.int64)).to(dev)
    test_xf = normalise(torch.from_numpy(tex.copy()).unsqueeze(1).to(dev))
    test_y = torch.from_numpy(tey.astype(np.int64)).to(dev)
    n_train, n_test = tx.shape[0], test_xf.shape[0]
    print(f"DATA train={n_train} test={n_test} epochs={a.epochs} (+1 warm-up)")

    results = []

    def report(mode, batch, metric, value, fmt):
        results.append((mode, batch, metric, value))
        print(f"RESULT framework=pytorch mode={mode} batch={batch} metric={metric} "
              f"value={value:{fmt}}", flush=True)

    def fresh_model():
        torch.manual_seed(a.seed)
        model = lenet5().to(dev)
        n = sum(p.numel() for p in model.parameters())
        assert n == N_PARAMS, f"LeNet-5 has {n} parameters, expected {N_PARAMS}"
        return model

    # ---- training ----
    for batch in [int(b) for b in a.batches.split(",") if b]:
        for mode in modes:
            model = fresh_model()
            opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
            gen = torch.Generator(device=dev)
            gen.manual_seed(a.seed)
            epoch = make_epoch(mode, model, opt, tx, ty, batch, gen, dev)
            epoch()  # warm-up epoch
            sync(dev)
            times = [timed(epoch, dev) for _ in range(a.epochs)]
            report(mode, batch, "epoch_s", statistics.median(times), ".6f")
            report(mode, batch, "test_acc", accuracy(model, test_xf, test_y), ".1f")
            del epoch, opt, model

    # ---- inference ----
    model = fresh_model().eval()
    for ib in sorted({a.infer_batch, 1024}, reverse=True):
        chunks = [test_xf[s:s + ib] for s in range(0, n_test, ib)]

        def fwd_pass():
            return [model(c) for c in chunks]
        for mode in modes:
            with torch.no_grad():
                run = fwd_pass
                if mode == "graph":
                    g, _ = capture(fwd_pass)
                    run = g.replay
                for _ in range(3):
                    run()
                sync(dev)
                t = statistics.median([timed(run, dev) for _ in range(a.infer_runs)])
            report(mode, ib, "infer_img_s", n_test / t, ".1f")

    for mode in modes:
        with torch.no_grad():
            static_in = test_xf[:1].clone()
            if mode == "graph":
                g, _ = capture(lambda: model(static_in))

                def run(x):
                    static_in.copy_(x)
                    g.replay()
            else:
                run = model
            lat = []
            for i in range(a.latency_iters + 50):  # first 50: warm-up
                x = test_xf[i % n_test:i % n_test + 1]
                sync(dev)
                t0 = time.perf_counter()
                run(x)
                sync(dev)
                if i >= 50:
                    lat.append(time.perf_counter() - t0)
        report(mode, 1, "latency_us", statistics.median(lat) * 1e6, ".3f")

    # ---- human-readable summary ----
    get = {(m, b, k): v for m, b, k, v in results}
    print(f"\nLeNet-5 / MNIST, PyTorch {torch.__version__} on {name} "
          f"(cudnn.benchmark={a.cudnn_benchmark}, TF32 off)")
    print(f"{'mode':<6} {'batch':>6} {'epoch_s':>10} {'train img/s':>12} {'test_acc%':>9}")
    for m, b, k, v in results:
        if k == "epoch_s":
            print(f"{m:<6} {b:>6} {v:>10.4f} {n_train / v:>12.0f} "
                  f"{get[(m, b, 'test_acc')]:>9.1f}")
    print(f"{'mode':<6} {'batch':>6} {'infer img/s':>12} {'latency_us':>11}")
    for m, b, k, v in results:
        if k == "infer_img_s":
            print(f"{m:<6} {b:>6} {v:>12.0f} {'':>11}")
        elif k == "latency_us":
            print(f"{m:<6} {b:>6} {'':>12} {v:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
