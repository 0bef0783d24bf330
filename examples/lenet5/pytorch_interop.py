#!/usr/bin/env python3
"""LeNet-5 weights between ctnn and PyTorch, through safetensors files.

  pytorch_interop.py eval MODEL [--data DIR]
      loads MODEL (e.g. written by `lenet5 train`) into the PyTorch LeNet-5 below with
      safetensors.torch.load_file and load_state_dict(strict=True), prints its MNIST test accuracy.
  pytorch_interop.py train OUT [--data DIR] [--epochs N]
      trains the PyTorch LeNet-5 and saves it with safetensors.torch.save_file; `lenet5 eval --model OUT`
      and `lenet5 predict --model OUT ...` then use it.

The names match because the PyTorch model keeps ctnn's layer positions: its layers are one
nn.Sequential with the same entries as ctnn's Seq, and, as ctnn's Dense flattens its input itself, the
flatten is done in forward() rather than by an nn.Flatten that would take a position. Tensor layouts
are PyTorch's in both (conv [out][in][k][k], dense [out][in], flattening C, H, W in that order).
Needs torch, safetensors and numpy; uses CUDA when available.
"""
import argparse
import gzip
import json
import os
import struct

import numpy as np
import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

MEAN, STD = 0.1307, 0.3081


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),   # layers.0 .. 2
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),             # layers.3 .. 5
            nn.Linear(400, 120), nn.ReLU(),                              # layers.6 .. 7
            nn.Linear(120, 84), nn.ReLU(),                               # layers.8 .. 9
            nn.Linear(84, 10))                                           # layers.10 (ctnn's Softmax: 11)

    def forward(self, x):  # logits; ctnn's last layer applies the softmax
        for i, layer in enumerate(self.layers):
            if i == 6:
                x = x.flatten(1)
            x = layer(x)
        return x


def read_idx(path):
    """An IDX file, raw or PATH.gz."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    rank = raw[3]
    dims = struct.unpack(">" + "I" * rank, raw[4:4 + 4 * rank])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def mnist(data, split, device, mean=MEAN, std=STD):
    x = torch.tensor(read_idx(os.path.join(data, split + "-images-idx3-ubyte")), dtype=torch.float32)
    y = torch.tensor(read_idx(os.path.join(data, split + "-labels-idx1-ubyte")), dtype=torch.long)
    return ((x / 255 - mean) / std).unsqueeze(1).to(device), y.to(device)


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["eval", "train"])
    p.add_argument("file", help="safetensors file to read (eval) or write (train)")
    p.add_argument("--data", default=".data/mnist", help="MNIST IDX files, raw or .gz (default: .data/mnist)")
    p.add_argument("--epochs", type=int, default=2, help="train: epochs (SGD, lr 0.05, momentum 0.9, batch 64)")
    a = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = LeNet5().to(device)
    if a.command == "eval":
        with safe_open(a.file, "pt") as f:
            meta = f.metadata() or {}
            print(f"{a.file}: metadata {meta}")
        # A file from `lenet5 train` carries its normalisation and class names (docs/cli.md).
        mean, std = float(meta.get("mean", MEAN)), float(meta.get("std", STD))
        if "class_names" in meta:
            print(f"{a.file}: classes {json.loads(meta['class_names'])}")
        xt, yt = mnist(a.data, "t10k", device, mean, std)
        model.load_state_dict(load_file(a.file), strict=True)
        print(f"{a.file}: PyTorch test accuracy {100 * accuracy(model, xt, yt):.2f}%")
        return
    xt, yt = mnist(a.data, "t10k", device)
    x, y = mnist(a.data, "train", device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(len(x), device=device)
        for i in range(0, len(x), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
        print(f"epoch {epoch}: test accuracy {100 * accuracy(model, xt, yt):.2f}%")
    # The normalisation and class names, as lenet5 writes them: lenet5 eval/predict use them.
    meta = {"format": "pt", "mean": str(MEAN), "std": str(STD),
            "class_names": json.dumps([str(c) for c in range(10)])}
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, a.file, metadata=meta)
    print(f"saved {a.file}: {', '.join(sorted(model.state_dict()))}")


if __name__ == "__main__":
    main()
