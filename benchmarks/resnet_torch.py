#!/usr/bin/python3
"""PyTorch reference for tessera's sample ResNet (apps/resnet): the same
ResNet-(6n+2) for 28x28x1 Fashion-MNIST (3x3 stem, 3 stages of n basic blocks
with w, 2w, 4w channels, 1x1 convolution + batch norm on the shortcuts where
the shape changes, global average pooling, linear), the same augmentation
(random crop from a 2-pixel zero padding, horizontal flip), the same SGD with
momentum (no weight decay on biases and batch-norm parameters) and schedule
(linear warmup, then polynomial decay of power 2).

Optional: never a dependency of tessera. Needs Debian's python3-torch (torch
1.13, run with /usr/bin/python3) and dataset-fashion-mnist.

  speed:  /usr/bin/python3 resnet_torch.py speed --batch 128 --steps 20 --threads 2
  train:  /usr/bin/python3 resnet_torch.py train --epochs 10 --batch 128

Threads (apps-baseline-and-data.md): torch.set_num_threads does not limit
OpenBLAS; start with OPENBLAS_NUM_THREADS set, and with 2 threads set
OMP_WAIT_POLICY=PASSIVE (the best single-process setting on 2 cores).
"""
import argparse
import gzip
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    if magic == 0x803:
        n, r, c = struct.unpack(">III", data[4:16])
        return np.frombuffer(data, np.uint8, n * r * c, 16).reshape(n, r, c)
    if magic == 0x801:
        n, = struct.unpack(">I", data[4:8])
        return np.frombuffer(data, np.uint8, n, 8)
    raise SystemExit(f"{path}: not an IDX file (magic {magic:#010x})")


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNet(nn.Module):
    def __init__(self, depth=20, width=16, classes=10):
        super().__init__()
        assert depth >= 8 and (depth - 2) % 6 == 0
        n = (depth - 2) // 6
        self.stem = nn.Conv2d(1, width, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        blocks, c = [], width
        for stage in range(3):
            cout = width << stage
            for i in range(n):
                blocks.append(Block(c, cout, 2 if stage > 0 and i == 0 else 1))
                c = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.blocks(x)
        return self.fc(x.mean((2, 3)))


def make_optimizer(model, lr, wd, momentum):
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    other = [p for n, p in model.named_parameters() if p.ndim <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": wd}, {"params": other, "weight_decay": 0.0}],
                           lr=lr, momentum=momentum)


def schedule(t, warmup, total):
    if warmup > 0 and t <= warmup:
        return t / warmup
    f = 1.0 - (t - warmup) / (total - warmup + 1.0)
    return max(f, 0.0) ** 2


def augment(x, gen, pad=2):
    n = x.shape[0]
    xp = F.pad(x, (pad, pad, pad, pad), value=-MEAN / STD)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    flip = torch.rand(n, generator=gen) < 0.5
    out = torch.empty_like(x)
    for i in range(n):
        img = xp[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28]
        out[i] = img.flip(-1) if flip[i] else img
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["speed", "train"])
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20, help="speed: timed steps (after 3 warm-up steps)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=None, help="default 0.1 * batch / 128")
    ap.add_argument("--warmup", type=float, default=None, help="warmup epochs (0 at batch <= 256, else 2)")
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="train mode: cpu (default) or cuda; the augmentation and the\n"
                    "data order stay on the CPU, drawn from the seed, so a GPU run draws the same batches")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = ResNet(a.depth, a.width)
    dev = torch.device(a.device if a.mode == "train" else "cpu")
    model.to(dev)
    lr = a.lr if a.lr is not None else 0.1 * a.batch / 128
    opt = make_optimizer(model, lr, a.wd, a.momentum)
    env = {k: os.environ.get(k, "-") for k in ("OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    print(f"torch {torch.__version__}, {a.threads} thread(s), {env}, ResNet-{a.depth} width {a.width}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, batch {a.batch}", flush=True)

    if a.mode == "speed":
        model.train()
        x = torch.randn(a.batch, 1, 28, 28)
        y = torch.randint(0, 10, (a.batch,))
        times, cpu = [], []
        for i in range(a.steps + 3):
            t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if i >= 3:
                times.append(dt)
                cpu.append(dc)
        med, best = statistics.median(times), min(times)
        # CPU seconds of the process (all its threads) per step: images per
        # CPU-second are steadier than wall-clock ones on a shared machine.
        print(f"speed: median {med * 1e3:.1f} ms/step ({a.batch / med:.1f} img/s), "
              f"min {best * 1e3:.1f} ms/step ({a.batch / best:.1f} img/s) over {len(times)} steps; "
              f"{a.batch / statistics.median(cpu):.1f} img/cpu-s")
        return

    xs = torch.from_numpy(read_idx(f"{a.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0)
    ys = torch.from_numpy(read_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    if a.train_limit:
        xs, ys = xs[:a.train_limit], ys[:a.train_limit]
    xs = ((xs - MEAN) / STD).unsqueeze(1)
    xt = ((torch.from_numpy(read_idx(f"{a.data}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0) - MEAN)
          / STD).unsqueeze(1)
    yt = torch.from_numpy(read_idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    spe = xs.shape[0] // a.batch
    total = int(a.epochs * spe)
    warm = a.warmup if a.warmup is not None else (0.0 if a.batch <= 256 else 2.0)
    warmup = min(int(round(warm * spe)), total - 1)
    gen = torch.Generator().manual_seed(a.seed)
    step, t_train = 0, 0.0
    while step < total:
        perm = torch.randperm(xs.shape[0], generator=gen)
        model.train()
        for s in range(spe):
            if step >= total:
                break
            t0 = time.perf_counter()
            idx = perm[s * a.batch:(s + 1) * a.batch]
            xb, yb = augment(xs[idx], gen).to(dev), ys[idx].to(dev)
            step += 1
            for g in opt.param_groups:
                g["lr"] = lr * schedule(step, warmup, total)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            t_train += time.perf_counter() - t0
            if step % 50 == 0 or step == total:
                print(f"step {step}/{total} loss {loss.item():.4f} {step * a.batch / t_train:.1f} img/s", flush=True)
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, xt.shape[0], 500):
                correct += (model(xt[i:i + 500].to(dev)).argmax(1).cpu() == yt[i:i + 500]).sum().item()
        print(f"epoch {(step + spe - 1) // spe}: test accuracy {correct / xt.shape[0]:.4f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
