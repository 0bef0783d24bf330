#!/usr/bin/env python3
"""cuDNN on the convolution layers that benchmarks/conv_bench.cu times for ctnn: the CIFAR networks'
stride-1 3x3 layers, forward, backward data and backward weights, batches 64 and 256.

Each operation is captured 50 times into one CUDA graph (after warm-up calls, so that cudnn.benchmark
has chosen its algorithm) and the graph replayed: the times are the kernels', without PyTorch's
per-call dispatch. Median of 7 replays, µs per operation. NCHW (ctnn's layout) and channels_last
(cuDNN's preferred one for tensor cores). TF32 allowed unless --fp32.

Usage: python3 benchmarks/pytorch_conv_layers.py [--fp32]
"""
import argparse

import torch
import torch.nn.functional as F

LAYERS = [(32, 32, 32), (32, 16, 64), (64, 16, 64), (64, 8, 64)]  # (C, H = W, Out)
REPS = 50


def graph_time_us(fn):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPS):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / REPS)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fp32", action="store_true", help="TF32 off")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = not args.fp32
    torch.backends.cuda.matmul.allow_tf32 = not args.fp32
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}, "
          f"{'FP32' if args.fp32 else 'TF32 allowed'}; µs per operation (TFLOP/s), kernels only (CUDA graph)")
    for c, h, out in LAYERS:
        for batch in (64, 256):
            gflop = 2.0 * batch * out * h * h * c * 9 / 1e9
            for name, fmt in (("nchw", torch.contiguous_format), ("channels_last", torch.channels_last)):
                x = torch.randn(batch, c, h, h, device="cuda").to(memory_format=fmt)
                w = torch.randn(out, c, 3, 3, device="cuda").to(memory_format=fmt)
                b = torch.randn(out, device="cuda")
                dy = torch.randn(batch, out, h, h, device="cuda").to(memory_format=fmt)
                fwd = graph_time_us(lambda: F.conv2d(x, w, b, padding=1))
                dgrad = graph_time_us(lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=1))
                wgrad = graph_time_us(lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1))
                cells = "  ".join(f"{d} {t:7.1f} ({gflop / t * 1e3:6.1f})"
                                  for d, t in (("fwd", fwd), ("dgrad", dgrad), ("wgrad", wgrad)))
                print(f"{c}->{out} @{h:<2} batch {batch:<3} {name:<13} {cells}")


if __name__ == "__main__":
    main()
