#!/bin/sh
# The worked cases of docs/ATTENTION.md and docs/OPTIMIZERS.md on the shipped
# default profile: attention, time chooses the ring and energy the
# all-to-all; optimizer, time data parallel and energy sharded.
# usage: plan_objectives_cases.sh BENCH_PLAN_OBJECTIVES
set -e
b="$1"
"$b" attention --ranks 16 --ranks-per-node 8 --seq 2048 --batch 4 --heads 32 --kv-heads 32 --dim 128 > attn16.txt
cat attn16.txt
grep -q '^ring  *contiguous .* time $' attn16.txt
grep -q '^all-to-all contiguous .* energy energy-x-time$' attn16.txt
"$b" optimizer --ranks 16 --ranks-per-node 8 --params 20000 --groups 1 > opt16.txt
cat opt16.txt
grep -q '^data-parallel .* time $' opt16.txt
grep -q '^sharded .* energy energy-x-time$' opt16.txt
