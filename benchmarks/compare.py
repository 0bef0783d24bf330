#!/usr/bin/env python3
"""Compare ctnn's and PyTorch's LeNet-5 benchmark results.

Reads the machine lines that benchmarks/lenet5_bench and benchmarks/pytorch_lenet5.py print,
  RESULT framework=<f> mode=<eager|graph> batch=<B> metric=<m> value=<v>
  DEVICE name="<device>"
from the files given (or stdin, also as "-"), and repeats their NOTE lines (what a measurement
includes) at the end; other lines are ignored. A DEVICE line names the
device of the RESULT lines that follow it in the same input.

Prints, for each metric, one row per batch size with each framework/mode's value and ctnn's
speed-up over each PyTorch mode (how many times faster ctnn is: PyTorch time / ctnn time, or ctnn
throughput / PyTorch throughput). ctnn is compared with PyTorch in the same mode when it reports
that mode, otherwise with its only mode. Metrics only one framework reports are listed at the end.
A device mismatch between the inputs is announced at the top and the bottom.

Usage: compare.py [FILE ...]      exit status 0, or 1 when no RESULT line was found
"""
import shlex
import sys

CTNN, TORCH = "ctnn", "pytorch"
MODES = ("eager", "graph")

# metric -> (title, unit, higher is better, format)
METRICS = {
    "epoch_s": ("training time per epoch (median)", "s", False, "{:.4f}"),
    "test_acc": ("test accuracy after the timed epochs", "%", True, "{:.2f}"),
    "infer_img_s": ("inference throughput over the 10k test images (median)", "img/s", True, "{:,.0f}"),
    "latency_us": ("batch-1 latency (median)", "us", False, "{:.1f}"),
}
# Accuracies are compared side by side, not as a speed-up.
NO_SPEEDUP = {"test_acc"}


def parse(stream, source, results, devices, notes):
    """Adds (framework, mode, batch, metric) -> value to results, framework -> {device} to devices,
    and the text of NOTE lines to notes."""
    device = None
    pending = set()  # frameworks seen before any DEVICE line of this input
    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if line.startswith("NOTE ") and line[5:] not in notes:
            notes.append(line[5:])
        if not (line.startswith("RESULT ") or line.startswith("DEVICE ")):
            continue
        try:
            fields = dict(tok.split("=", 1) for tok in shlex.split(line)[1:])
        except ValueError as e:
            print(f"compare.py: {source}:{lineno}: cannot parse {line!r}: {e}", file=sys.stderr)
            continue
        if line.startswith("DEVICE "):
            device = fields.get("name", "?")
            for fw in pending:
                devices.setdefault(fw, set()).add(device)
            pending.clear()
            continue
        try:
            key = (fields["framework"], fields["mode"], int(fields["batch"]), fields["metric"])
            value = float(fields["value"])
        except (KeyError, ValueError) as e:
            print(f"compare.py: {source}:{lineno}: bad RESULT line {line!r}: {e}", file=sys.stderr)
            continue
        if key in results and results[key] != value:
            print(f"compare.py: {source}:{lineno}: {key} reported twice ({results[key]} and {value}); "
                  f"keeping the last", file=sys.stderr)
        results[key] = value
        if device is None:
            pending.add(key[0])
        else:
            devices.setdefault(key[0], set()).add(device)
    for fw in pending:
        devices.setdefault(fw, set()).add("(no DEVICE line)")


def fmt(metric, v):
    return "—" if v is None else METRICS.get(metric, ("", "", True, "{:.4g}"))[3].format(v)


def plain(v):
    return f"{v:,.3f}".rstrip("0").rstrip(".")


def speedup(metric, ctnn, torch):
    if ctnn is None or torch is None or ctnn <= 0 or torch <= 0:
        return "—"
    higher_better = METRICS[metric][2]
    return f"{(ctnn / torch if higher_better else torch / ctnn):.2f}x"


def table(headers, rows):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def main(argv):
    results, devices, notes = {}, {}, []
    for path in argv or ["-"]:
        if path == "-":
            parse(sys.stdin, "<stdin>", results, devices, notes)
        else:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    parse(f, path, results, devices, notes)
            except OSError as e:
                print(f"compare.py: cannot read {path}: {e.strerror}", file=sys.stderr)
                return 1
    if not results:
        print("compare.py: no RESULT lines found in " + (", ".join(argv) or "stdin"), file=sys.stderr)
        return 1

    all_devices = set().union(*devices.values()) if devices else set()
    warning = None
    if len(all_devices) > 1:
        named = "; ".join(f"{fw}: {', '.join(sorted(d))}" for fw, d in sorted(devices.items()))
        warning = ("!" * 78 + "\n!! WARNING: THE RESULTS COME FROM DIFFERENT DEVICES — the ratios below "
                   "compare\n!! unlike machines and mean nothing.\n!! " + named + "\n" + "!" * 78)
        print(warning + "\n")
    for fw in (CTNN, TORCH):
        if not any(k[0] == fw for k in results):
            print(f"NOTE: no results from {fw}\n")
    print("device: " + (", ".join(sorted(all_devices)) or "unknown"))

    modes = {fw: [m for m in MODES if any(k[0] == fw and k[1] == m for k in results)] +
             sorted({k[1] for k in results if k[0] == fw} - set(MODES)) for fw in (CTNN, TORCH)}

    def get(fw, mode, batch, metric):
        return results.get((fw, mode, batch, metric))

    def ctnn_mode_for(metric, torch_mode):
        """ctnn's mode to set against PyTorch's torch_mode for this metric."""
        have = [m for m in modes[CTNN] if any(k[0] == CTNN and k[1] == m and k[3] == metric for k in results)]
        if torch_mode in have:
            return torch_mode
        return have[0] if len(have) == 1 else None

    for metric, (title, unit, higher_better, _) in METRICS.items():
        batches = sorted({k[2] for k in results if k[3] == metric})
        if not batches:
            continue
        cols = [(fw, m) for fw in (CTNN, TORCH) for m in modes[fw]
                if any(k[0] == fw and k[1] == m and k[3] == metric for k in results)]
        headers = ["batch"] + [f"{fw} {m}" for fw, m in cols]
        pairs = []
        if metric not in NO_SPEEDUP:
            for tm in modes[TORCH]:
                cm = ctnn_mode_for(metric, tm)
                if cm and any(k[0] == TORCH and k[1] == tm and k[3] == metric for k in results):
                    pairs.append((cm, tm))
                    headers.append(f"ctnn {cm} vs torch {tm}")
        rows = []
        for b in batches:
            row = [b] + [fmt(metric, get(fw, m, b, metric)) for fw, m in cols]
            row += [speedup(metric, get(CTNN, cm, b, metric), get(TORCH, tm, b, metric)) for cm, tm in pairs]
            rows.append(row)
        better = "higher" if higher_better else "lower"
        print(f"\n{title} [{unit}, {better} is better" +
              ("; speed-up = how many times faster ctnn is]" if pairs else "]"))
        table(headers, rows)

    others = sorted({k for k in results if k[3] not in METRICS}, key=lambda k: (k[3], k[0], k[1], k[2]))
    if others:
        print("\nother metrics (one framework only)")
        table(["metric", "framework", "mode", "batch", "value"],
              [[k[3], k[0], k[1], k[2], plain(results[k])] for k in others])
    if notes:
        print("\nnotes from the benchmarks")
        for n in notes:
            print("  " + n)
    if warning:
        print("\n" + warning)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
