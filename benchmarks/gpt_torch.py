#!/usr/bin/python3
"""PyTorch CPU baseline for tessera-gpt (apps/gpt): the same model, timed.

Optional: needs Debian's python3-torch (run with /usr/bin/python3); tessera
never depends on it. The model matches tessera-gpt's: byte vocabulary 256,
token and position embeddings, pre-LayerNorm blocks with causal multi-head
attention and a 4x GELU(tanh) MLP, final LayerNorm, untied LM head,
cross-entropy, AdamW (decay on matrices). Tokens are random bytes (the step
time does not depend on them).

  OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=2 /usr/bin/python3 gpt_torch.py --threads 2
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 gpt_torch.py --threads 1 --ddp 2

Prints one line per step and a summary line "torch-gpt ... median X ms min Y ms".
"""
import argparse
import math
import os
import statistics
import sys
import time


def build(args, torch):
    nn = torch.nn
    F = torch.nn.functional
    C, H, T, V, L = args.width, args.heads, args.seq, 256, args.layers

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fp = nn.Linear(4 * C, C)
            # a plain attribute, not a buffer: DDP over gloo cannot broadcast bool tensors
            self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

        def forward(self, x):
            B, Tn, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, Tn, H, C // H).transpose(1, 2)
            k = k.view(B, Tn, H, C // H).transpose(1, 2)
            v = v.view(B, Tn, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = att.masked_fill(~self.mask[:Tn, :Tn], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, Tn, C)
            x = x + self.proj(y)
            return x + self.fp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.lnf = nn.LayerNorm(C)
            self.head = nn.Linear(C, V, bias=False)

        def forward(self, idx, tgt):
            pos = torch.arange(idx.shape[1])
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.lnf(x))
            return F.cross_entropy(logits.view(-1, V), tgt.view(-1))

    return GPT()


def run(rank, world, args):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build(args, torch)
    if world > 1:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3)
    bl = args.batch // world
    g = torch.Generator().manual_seed(args.seed + rank)
    times = []
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, 256, (bl, args.seq), generator=g)
        tgt = torch.randint(0, 256, (bl, args.seq), generator=g)
        t0 = time.perf_counter()
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if world > 1:
            torch.distributed.barrier()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        if rank == 0 and not args.quiet:
            print(f"step {step:3d} loss {loss.item():.4f} {ms:8.1f} ms", flush=True)
    if rank == 0:
        t = times[1:] if len(times) > 1 else times
        C, L, T = args.width, args.layers, args.seq
        flop = 3 * (2 * 12 * C * C * L + 2 * C * 256 + 4 * T * C * L) * args.batch * T
        med = statistics.median(t)
        nparam = sum(p.numel() for p in model.parameters())
        print(f"torch-gpt ranks {world} threads {args.threads} params {nparam}: median {med:.1f} ms "
              f"min {min(t):.1f} ms over {len(t)} steps; {args.batch * T / (med / 1e3):.0f} tokens/s; "
              f"{flop / (med / 1e3) / 1e9:.1f} GFLOP/s (torch {torch.__version__})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ddp", type=int, default=1, help="ranks of DistributedDataParallel over gloo")
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("gpt_torch.py: PyTorch is not installed (Debian: apt-get install python3-torch; "
              "run with /usr/bin/python3)", file=sys.stderr)
        return 2
    if args.ddp > 1:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(args.ddp, args), nprocs=args.ddp, join=True)
    else:
        run(0, 1, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
