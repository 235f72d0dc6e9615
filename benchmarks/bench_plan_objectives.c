/*
 * bench_plan_objectives: the attention and optimizer planners' candidates
 * with their modelled time and joules, and the choice of each objective
 * (time, energy, energy x time). Plans only: no communication, any rank
 * count. Public C API only.
 *
 *   bench_plan_objectives attention --ranks P [--seq N] [--batch B] [--heads H]
 *       [--kv-heads G] [--dim D] [--causal] [--mask] [--forward-only] [--double]
 *       [--ranks-per-node R] [--alpha S] [--beta S] [--gamma S] [--profile FILE] [--csv FILE]
 *   bench_plan_objectives optimizer --ranks P [--params N] [--groups L] [--lars]
 *       [--bf16] [--bucket-bytes B] [--memory BYTES] [--ranks-per-node R]
 *       [--alpha S] [--beta S] [--gamma S] [--profile FILE] [--csv FILE]
 *
 * Exit status: 0, 1 on a tessera error, 2 on bad arguments.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

static const char* variant_name(int v) { return v == 0 ? "ring" : v == 1 ? "two-pass" : "all-to-all"; }
static const char* layout_name(int l) { return l == 0 ? "contiguous" : l == 1 ? "zigzag" : "striped"; }

static int usage(const char* why) {
  fprintf(stderr, "bench_plan_objectives: %s\nusage: bench_plan_objectives attention|optimizer --ranks P [options] "
                  "(see the header of benchmarks/bench_plan_objectives.c)\n", why);
  return 2;
}

static int num(const char* s, double* out) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0)) return 1;
  *out = v;
  return 0;
}

int main(int argc, char** argv) {
  int attention, i, o;
  double ranks = 0, rpn = 0, seq = 8192, batch = 1, heads = 32, kv = 8, dim = 128, params = 1e8, groups = 100;
  double bucket = 0, memory = 0, alpha = 0, beta = 0, gamma = 0;
  int causal = 0, mask = 0, fwd_only = 0, dbl = 0, lars = 0, bf16 = 0;
  const char *profile_path = NULL, *csv = NULL;
  tsr_energy_profile prof = NULL;
  FILE* f = NULL;
  if (argc < 2 || (strcmp(argv[1], "attention") != 0 && strcmp(argv[1], "optimizer") != 0))
    return usage("the first argument must be 'attention' or 'optimizer'");
  attention = strcmp(argv[1], "attention") == 0;
  for (i = 2; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    double* target = NULL;
    if (!strcmp(a, "--causal")) { causal = 1; continue; }
    if (!strcmp(a, "--mask")) { mask = 1; continue; }
    if (!strcmp(a, "--forward-only")) { fwd_only = 1; continue; }
    if (!strcmp(a, "--double")) { dbl = 1; continue; }
    if (!strcmp(a, "--lars")) { lars = 1; continue; }
    if (!strcmp(a, "--bf16")) { bf16 = 1; continue; }
    if (!strcmp(a, "--ranks")) target = &ranks;
    else if (!strcmp(a, "--ranks-per-node")) target = &rpn;
    else if (!strcmp(a, "--seq")) target = &seq;
    else if (!strcmp(a, "--batch")) target = &batch;
    else if (!strcmp(a, "--heads")) target = &heads;
    else if (!strcmp(a, "--kv-heads")) target = &kv;
    else if (!strcmp(a, "--dim")) target = &dim;
    else if (!strcmp(a, "--params")) target = &params;
    else if (!strcmp(a, "--groups")) target = &groups;
    else if (!strcmp(a, "--bucket-bytes")) target = &bucket;
    else if (!strcmp(a, "--memory")) target = &memory;
    else if (!strcmp(a, "--alpha")) target = &alpha;
    else if (!strcmp(a, "--beta")) target = &beta;
    else if (!strcmp(a, "--gamma")) target = &gamma;
    else if (!strcmp(a, "--profile") && v) { profile_path = v; ++i; continue; }
    else if (!strcmp(a, "--csv") && v) { csv = v; ++i; continue; }
    else return usage("unknown option or missing value");
    if (!v || num(v, target)) return usage("an option needs a number >= 0");
    ++i;
  }
  if (ranks < 1) return usage("--ranks P (P >= 1) is required");
  if (profile_path && tsr_energy_profile_load(profile_path, &prof) != TSR_SUCCESS) {
    fprintf(stderr, "bench_plan_objectives: %s\n", tsr_last_error(NULL));
    return 1;
  }
  if (csv && !(f = fopen(csv, "w"))) {
    fprintf(stderr, "bench_plan_objectives: cannot write %s\n", csv);
    return 1;
  }
  if (attention) {
    tsr_attn_problem p = TSR_ATTN_PROBLEM_INIT;
    tsr_attn_candidate all[9];
    size_t n = 0, c;
    int chosen[3] = {-1, -1, -1};
    p.seq_len = (size_t)seq;
    p.batch = (size_t)batch;
    p.heads = (size_t)heads;
    p.kv_heads = (size_t)kv;
    p.dim = (size_t)dim;
    p.causal = causal;
    p.has_key_mask = mask;
    p.backward = !fwd_only;
    p.type = dbl ? TSR_FLOAT64 : TSR_FLOAT32;
    p.nranks = (int)ranks;
    p.ranks_per_node = (int)rpn;
    p.memory_per_rank = memory;
    p.machine.alpha = alpha;
    p.machine.beta = beta;
    p.machine.gamma = gamma;
    p.profile = prof;
    for (o = 0; o < 3; ++o) {
      p.objective = (tsr_objective)o;
      if (tsr_attn_plan_candidates(&p, all, 9, &n) != TSR_SUCCESS) {
        fprintf(stderr, "bench_plan_objectives: %s\n", tsr_last_error(NULL));
        return 1;
      }
      for (c = 0; c < n; ++c)
        if (all[c].chosen) chosen[o] = (int)c;
    }
    printf("attention N=%zu B=%zu H=%zu G=%zu d=%zu %s%s%s on %d ranks (%d per node), profile %s\n", p.seq_len,
           p.batch, p.heads, p.kv_heads, p.dim, causal ? "causal " : "", mask ? "masked " : "",
           fwd_only ? "forward" : "forward+backward", p.nranks, p.ranks_per_node, profile_path ? profile_path : "default-2025");
    printf("%-10s %-10s %12s %12s %12s %12s %14s %14s %12s %s\n", "variant", "layout", "time_s", "joules", "joules_low",
           "joules_high", "intra_B", "inter_B", "memory_B", "chosen by");
    if (f) fprintf(f, "variant,layout,time_s,joules,joules_low,joules_high,intra_node_bytes,inter_node_bytes,self_bytes,flops,memory_bytes,fits,chosen_time,chosen_energy,chosen_edp\n");
    for (c = 0; c < n; ++c) {
      const tsr_attn_candidate* x = &all[c];
      printf("%-10s %-10s %12.5g %12.5g %12.5g %12.5g %14.0f %14.0f %12.0f %s%s%s%s\n", variant_name(x->variant),
             layout_name(x->layout), x->time, x->joules, x->joules_low, x->joules_high, x->intra_node_bytes,
             x->inter_node_bytes, x->memory_bytes, chosen[0] == (int)c ? "time " : "",
             chosen[1] == (int)c ? "energy " : "", chosen[2] == (int)c ? "energy-x-time" : "", x->fits ? "" : " (does not fit)");
      if (f)
        fprintf(f, "%s,%s,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%.0f,%d,%d,%d,%d\n", variant_name(x->variant),
                layout_name(x->layout), x->time, x->joules, x->joules_low, x->joules_high, x->intra_node_bytes,
                x->inter_node_bytes, x->self_bytes, x->flops, x->memory_bytes, x->fits, chosen[0] == (int)c,
                chosen[1] == (int)c, chosen[2] == (int)c);
    }
  } else {
    tsr_opt_problem p = TSR_OPT_PROBLEM_INIT;
    tsr_opt_plan plans[3];
    int d;
    p.kind = lars ? TSR_OPT_LARS : TSR_OPT_LAMB;
    p.param_type = bf16 ? TSR_BFLOAT16 : TSR_FLOAT32;
    p.n = (size_t)params;
    p.ngroups = (size_t)groups;
    p.nranks = (int)ranks;
    p.ranks_per_node = (int)rpn;
    p.bucket_bytes = bucket;
    p.memory_per_rank = memory;
    p.machine.alpha = alpha;
    p.machine.beta = beta;
    p.machine.gamma = gamma;
    p.profile = prof;
    for (o = 0; o < 3; ++o) {
      tsr_status st;
      p.objective = (tsr_objective)o;
      st = tsr_optimizer_plan(&p, &plans[o]);
      if (st != TSR_SUCCESS && st != TSR_ERR_NO_MEMORY) {
        fprintf(stderr, "bench_plan_objectives: %s\n", tsr_last_error(NULL));
        return 1;
      }
    }
    printf("optimizer %s %s, %zu parameters in %zu groups, on %d ranks (%d per node), profile %s\n",
           lars ? "LARS" : "LAMB", bf16 ? "bfloat16" : "float32", p.n, p.ngroups, p.nranks, p.ranks_per_node,
           profile_path ? profile_path : "default-2025");
    printf("%-14s %12s %12s %12s %12s %14s %14s %14s %14s %s\n", "step", "time_s", "joules", "joules_low",
           "joules_high", "recv_B/rank", "intra_B", "inter_B", "state_B/rank", "chosen by");
    if (f) fprintf(f, "dist,time_s,joules,joules_low,joules_high,bytes,messages,intra_node_bytes,inter_node_bytes,kernel_bytes,state_bytes,fits,chosen_time,chosen_energy,chosen_edp\n");
    for (d = 0; d < 2; ++d) {
      const tsr_opt_candidate* x = &plans[0].candidates[d];
      const int want = d ? TSR_OPT_SHARDED : TSR_OPT_DATA_PARALLEL;
      printf("%-14s %12.5g %12.5g %12.5g %12.5g %14.0f %14.0f %14.0f %14.0f %s%s%s%s\n",
             d ? "sharded" : "data-parallel", x->time, x->joules, x->joules_low, x->joules_high, x->bytes,
             x->intra_node_bytes, x->inter_node_bytes, x->state_bytes, (int)plans[0].dist == want ? "time " : "",
             (int)plans[1].dist == want ? "energy " : "", (int)plans[2].dist == want ? "energy-x-time" : "",
             x->fits ? "" : " (does not fit)");
      if (f)
        fprintf(f, "%s,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%d,%d,%d,%d\n", d ? "sharded" : "data-parallel",
                x->time, x->joules, x->joules_low, x->joules_high, x->bytes, x->messages, x->intra_node_bytes,
                x->inter_node_bytes, x->kernel_bytes, x->state_bytes, x->fits, (int)plans[0].dist == want,
                (int)plans[1].dist == want, (int)plans[2].dist == want);
    }
  }
  if (f) fclose(f);
  tsr_energy_profile_destroy(&prof);
  return 0;
}
