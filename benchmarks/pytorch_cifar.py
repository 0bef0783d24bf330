#!/usr/bin/env python3
"""PyTorch twins of benchmarks/cifar_nets.hpp, timed as benchmarks/cifar_bench.cu times ctnn.

Same synthetic data shapes (uint8 3x32x32, resident on the GPU), same networks, SGD momentum 0.9,
lr 0.01, FP32 with TF32 off, cudnn.benchmark on. Per network and batch: the median seconds of the
timed epochs (after 1 warm-up) in eager mode and with the whole training step captured as one CUDA
graph (the recipe of pytorch_lenet5.py), and the forward throughput over 10,000 resident images in
chunks of 256 (eager and graph).
"""
import argparse
import statistics
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from pytorch_lenet5 import capture, make_epoch, timed  # noqa: E402  (same recipes as the LeNet-5 script)


def vgg():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10))


def strided():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128 * 4 * 4, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=50000)
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 (for comparison with a TF32 path)")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    print(f"device: {torch.cuda.get_device_name(dev)}  torch {torch.__version__}  tf32 {int(a.tf32)}")
    gen = torch.Generator(device=dev)
    gen.manual_seed(1)
    tx = torch.randint(0, 256, (a.images, 3, 32, 32), dtype=torch.uint8, device=dev, generator=gen)
    ty = torch.randint(0, 10, (a.images,), device=dev, generator=gen)
    test = torch.randint(0, 256, (10000, 3, 32, 32), dtype=torch.uint8, device=dev, generator=gen)
    test = test.float().div_(255).sub_(0.5).div_(0.29)
    for name, make in (("vgg", vgg), ("strided", strided)):
        for batch in [int(b) for b in a.batches.split(",")]:
            for mode in ("eager", "graph"):
                torch.manual_seed(1)
                model = make().to(dev)
                opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
                epoch = make_epoch(mode, model, opt, tx, ty, batch, gen, dev)
                times = [timed(epoch, dev) for _ in range(1 + a.epochs)][1:]
                print(f"{name:8s} train  batch {batch:4d}  {mode:5s}  epoch_s {statistics.median(times):.4f}")
                sys.stdout.flush()
        model = make().to(dev).eval()
        chunks = [test[s:s + 256] for s in range(0, 10000, 256)]
        with torch.no_grad():
            def eager():
                for c in chunks:
                    model(c)
            rates = [10000 / timed(eager, dev) for _ in range(21)][1:]
            print(f"{name:8s} infer  batch  256  eager  infer_img_s {statistics.median(rates):.0f}")
            graphs = [capture(lambda c=c: model(c))[0] for c in chunks]

            def graph():
                for g in graphs:
                    g.replay()
            rates = [10000 / timed(graph, dev) for _ in range(21)][1:]
            print(f"{name:8s} infer  batch  256  graph  infer_img_s {statistics.median(rates):.0f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
