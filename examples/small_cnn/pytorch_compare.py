#!/usr/bin/env python3
"""small_cnn's model in PyTorch: the same architecture, loaded from the file ctnn wrote.

  pytorch_compare.py MODEL PROBS [--data DIR]
      MODEL  small_cnn.safetensors (written by the small_cnn example)
      PROBS  small_cnn_test_probs.bin (ctnn's test-set probabilities, float32 [count][10])
  loads MODEL with load_state_dict(strict=True) (every name and shape must match: layers.<i>.weight,
  layers.4.<j>.weight inside the Residual block, BatchNorm's running_mean, running_var and
  num_batches_tracked), runs the MNIST test set in evaluation mode, and prints the accuracy, how many
  predicted classes equal ctnn's and the largest probability difference. Exit status 0 when every
  class agrees.
  pytorch_compare.py time [--data DIR] [--epochs N]
      trains the same network in PyTorch (same batch, SGD momentum 0.9, lr 0.05, cosine) and prints
      each epoch's time, for comparison with ctnn's.

Layer positions are ctnn's: each ctnn layer is one entry of an nn.Sequential (ctnn's Dense flattens
its input itself, so GlobalAvgPool here returns [N, C] directly; ctnn's Softmax, the last layer, is
applied in forward()). Needs torch and numpy (safetensors when installed, else a built-in reader); uses CUDA when available.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

try:
    from safetensors.torch import load_file
except ImportError:  # the format is simple enough to read by hand: u64 header size, JSON header, data
    import json

    def load_file(path):
        with open(path, "rb") as f:
            blob = f.read()
        size = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + size])
        header.pop("__metadata__", None)
        dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}
        tensors = {}
        for name, t in header.items():
            begin, end = t["data_offsets"]
            data = np.frombuffer(blob, dtype=dtypes[t["dtype"]], count=(end - begin) // np.dtype(dtypes[t["dtype"]]).itemsize,
                                 offset=8 + size + begin)
            tensors[name] = torch.from_numpy(data.reshape(t["shape"]).copy())
        return tensors

MEAN, STD = 0.1307, 0.3081
# FP32 throughout, as ctnn computes: PyTorch's cuDNN convolutions would otherwise use TF32.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


class Residual(nn.Sequential):
    """input + f(input); its layers are named <j> inside it, as ctnn names them (layers.<i>.<j>)."""

    def forward(self, x):
        return x + super().forward(x)


class GlobalAvgPool(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),       # 0-2
            nn.MaxPool2d(2),                                                      # 3
            Residual(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                     nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)),        # 4
            nn.ReLU(),                                                            # 5
            nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32),
            nn.LeakyReLU(0.01),                                                   # 6-8
            GlobalAvgPool(),                                                      # 9
            nn.Dropout(0.2),                                                      # 10
            nn.Linear(32, 10))                                                    # 11 (ctnn's Softmax: 12)

    def forward(self, x):  # logits
        return self.layers(x)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        dims = struct.unpack(">" + "I" * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def load(data, split):
    x = read_idx(os.path.join(data, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(data, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy((x - MEAN) / STD).unsqueeze(1), torch.from_numpy(y)


def compare(args):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SmallCnn()
    model.load_state_dict(load_file(args.model), strict=True)
    model.to(device).eval()
    x, y = load(args.data, "t10k")
    with torch.no_grad():
        probs = torch.cat([torch.softmax(model(x[i:i + 1000].to(device)), 1).cpu() for i in range(0, len(x), 1000)])
    theirs = torch.from_numpy(np.fromfile(args.probs, dtype=np.float32).reshape(-1, 10))
    agree = int((probs.argmax(1) == theirs.argmax(1)).sum())
    accuracy = float((probs.argmax(1) == y).float().mean())
    print(f"PyTorch {torch.__version__} on {device}: test accuracy {100 * accuracy:.2f}%, "
          f"same class as ctnn for {agree} of {len(y)} images, "
          f"largest probability difference {float((probs - theirs).abs().max()):.3g}")
    return 0 if agree == len(y) else 1


def time_training(args):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(1)
    model = SmallCnn().to(device)
    x, y = load(args.data, "train")
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    steps = args.epochs * ((len(x) + 127) // 128)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        model.train()
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        order = torch.randperm(len(x), device=device)
        for i in range(0, len(x), 128):
            idx = order[i:i + 128]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            sched.step()
        if device == "cuda":
            torch.cuda.synchronize()
        print(f"PyTorch epoch {epoch}: {time.perf_counter() - start:.2f} s on {device} (loss {loss.item():.4f})")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="small_cnn.safetensors, or 'time'")
    p.add_argument("probs", nargs="?", help="small_cnn_test_probs.bin")
    p.add_argument("--data", default=".data/mnist")
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    if args.model == "time":
        return time_training(args)
    if not args.probs:
        p.error("compare needs MODEL and PROBS")
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
