// moekit: command-line lab for MoE-serving GPU kernels.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <new>

#include "commands.hpp"
#include "errors.hpp"
#include "gen.hpp"
#include "outputs.hpp"

namespace {

using namespace moekit;

constexpr const char* kExitCodes =
    "Exit codes: 0 ok, 1 validation mismatch (stderr names the first difference), 2 bad usage or bad input, "
    "3 CUDA error or no CUDA device where one is needed.";

void add_common(CLI::App* sub, CommonOpts& c) {
  sub->add_option("--variant", c.variant, "kernel variant, or auto (see `moekit variants`)")
      ->capture_default_str();
  sub->add_option("--device", c.device,
                  "gpu, cpu (the CPU reference only) or auto (gpu when a CUDA device exists)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  sub->add_option("--out", c.out, "folder for the output .npy files (written atomically); none: write nothing");
  sub->add_flag("--check,!--no-check", c.check, "compare the GPU result with the CPU reference (default: on)");
  sub->add_flag("--bench", c.bench, "time the kernel (CUDA graph replay by default)");
  sub->add_option("--warmup", c.warmup, "untimed launches before timing")->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_option("--iters", c.iters, "timed samples")->check(CLI::Range(1, 1000000))->capture_default_str();
  sub->add_flag("--cold", c.cold, "flush L2 before each timed launch (outside the timed region)");
  sub->add_flag("--graph,!--no-graph", c.graph,
                "time replays of a CUDA graph of 20 launches (default), or events around each launch");
  sub->add_option("--format", c.format, "report format")->check(CLI::IsMember({"text", "json", "csv"}))
      ->capture_default_str();
  sub->add_flag("--profile", c.profile,
                "ncu mode: one warm-up launch, then one launch between cudaProfilerStart/Stop in NVTX range "
                "moekit/<op>/<variant> (use ncu --profile-from-start off)");
  sub->add_option("--seed", c.seed, "seed for generated inputs")->capture_default_str();
}

int run(int argc, char** argv) {
  CLI::App app{"moekit: a command-line lab for the small GPU kernels around Mixture-of-Experts inference.\n"
               "Runs a kernel variant on a .npy input, checks it against a CPU reference and times it."};
  app.footer(std::string(kExitCodes) +
             "\nExamples:\n"
             "  moekit align --topk-ids data/trace_4096x8_e256.npy --num-experts 256 --block-size 128 --bench\n"
             "  moekit dedup --indices data/dedup_bs115_m2_k2048.npy --mtp-step 2 --variant auto --out out/\n"
             "  moekit act-and-mul --input data/act_64x2x1024_bf16.npy --activation silu --bench --format json\n"
             "  moekit gen align --tokens 4096 --topk 8 --num-experts 256 --dist zipf:1.2 -o trace.npy\n"
             "  moekit variants align");
  app.require_subcommand(1);
  app.set_version_flag("--version", "moekit 0.1.0");

  CommonOpts common;
  AlignArgs al;
  auto* align = app.add_subcommand("align", "moe_align_block_size: sort token slots by expert, pad to blocks");
  align->add_option("--topk-ids", al.topk_ids, "router expert ids, int32 or int64, any shape (.npy)");
  align->add_option("--num-experts,-E", al.num_experts, "number of (local) experts E")->required();
  align->add_option("--block-size,-B", al.block_size, "block size B (1..1024)")->capture_default_str();
  align->add_option("--expert-map", al.expert_map, "int32 [global experts] map to local ids, -1 = not local");
  align->add_flag("--pad-sorted-ids", al.pad_sorted_ids, "round the sorted_token_ids length up to a multiple of B");
  align->add_flag("--ignore-invalid", al.ignore_invalid,
                  "drop ids outside [0, E) (or the map) instead of rejecting the input");
  align->add_option("--tokens", al.tokens, "without --topk-ids: generate this many tokens");
  align->add_option("--topk", al.topk, "without --topk-ids: experts per token")->capture_default_str();
  align->add_option("--dist", al.dist, "without --topk-ids: uniform, zipf:S or hot:F")->capture_default_str();
  add_common(align, common);
  align->footer("Outputs: sorted_token_ids.npy, expert_ids.npy, num_tokens_post_pad.npy. " +
                std::string(kExitCodes));

  DedupArgs dd;
  auto* dedup = app.add_subcommand("dedup", "per-batch top-k index de-duplication (speculative decoding)");
  dedup->add_option("--indices", dd.indices, "int32 [bs*M, k] or [bs, M, k] (.npy); negative values are ignored");
  dedup->add_option("--mtp-step,-M", dd.mtp_step, "rows per batch M")->required();
  dedup->add_option("--max-index", dd.max_index, "promise: every value < N (checked); lets variants sort fewer bits");
  dedup->add_option("--batch", dd.batch, "without --indices: generate this many batches");
  dedup->add_option("--k", dd.k, "without --indices: values per row")->capture_default_str();
  dedup->add_option("--overlap", dd.overlap, "without --indices: fraction shared by consecutive rows")
      ->capture_default_str();
  add_common(dedup, common);
  dedup->footer("Output: dedup.npy, int32 [bs, M*k]: each batch's distinct values ascending, then -1. " +
                std::string(kExitCodes));

  ActArgs ac;
  auto* act = app.add_subcommand("act-and-mul", "out = act(x[..., :d]) * x[..., d:] (SiLU/GELU-and-mul)");
  act->alias("act_and_mul");
  act->add_option("--input", ac.input, "f16, bf16 or f32 [..., 2d] (.npy)");
  act->add_option("--activation", ac.activation, "silu, gelu or gelu-tanh")
      ->check(CLI::IsMember({"silu", "gelu", "gelu-tanh", "gelu_tanh"}))
      ->capture_default_str();
  act->add_option("--dtype", ac.dtype,
                  "with --input: read 2-byte data as this dtype (bf16 saved as int16/uint16/void)");
  act->add_option("--tokens", ac.tokens, "without --input: generate this many tokens");
  act->add_option("--d", ac.d, "without --input: output width d")->capture_default_str();
  act->add_option("--gen-dtype", ac.gen_dtype, "without --input: f16, bf16 or f32")->capture_default_str();
  add_common(act, common);
  act->footer("Output: out.npy [..., d], same dtype. " + std::string(kExitCodes));

  // gen
  auto* gen = app.add_subcommand("gen", "write synthetic inputs (.npy)");
  gen->require_subcommand(1);
  std::string out_file, dist = "uniform", id_dtype = "int32", gdtype = "bf16";
  std::int64_t g_tokens = 0, g_d = 0, g_max_index = std::int64_t(1) << 31;
  std::int32_t g_topk = 0, g_e = 0, g_batch = 0, g_m = 1, g_k = 0;
  double g_overlap = 0.0, g_pad = 0.0;
  std::uint64_t g_seed = 1;
  auto* ga = gen->add_subcommand("align", "router trace: [tokens, topk] expert ids, distinct per token");
  ga->add_option("--tokens", g_tokens, "tokens")->required();
  ga->add_option("--topk", g_topk, "experts per token")->required();
  ga->add_option("--num-experts,-E", g_e, "experts")->required();
  ga->add_option("--dist", dist, "uniform, zipf:S or hot:F")->capture_default_str();
  ga->add_option("--dtype", id_dtype, "int32 or int64")->check(CLI::IsMember({"int32", "int64"}))
      ->capture_default_str();
  auto* gd = gen->add_subcommand("dedup", "speculative top-k rows: [bs*M, k] int32");
  gd->add_option("--batch", g_batch, "batches bs")->required();
  gd->add_option("--mtp-step,-M", g_m, "rows per batch M")->capture_default_str();
  gd->add_option("--k", g_k, "values per row")->required();
  gd->add_option("--max-index", g_max_index, "values are drawn from [0, N)")->capture_default_str();
  gd->add_option("--overlap", g_overlap, "fraction of a row's values carried from the previous row")
      ->capture_default_str();
  gd->add_option("--pad", g_pad, "fraction of each row's tail set to -1")->capture_default_str();
  auto* gm = gen->add_subcommand("act-and-mul", "normal random [tokens, 2d] activations");
  gm->alias("act_and_mul");
  gm->add_option("--tokens", g_tokens, "tokens")->required();
  gm->add_option("--d", g_d, "output width d (input rows are 2d)")->required();
  gm->add_option("--dtype", gdtype, "f16, bf16 or f32")->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  for (auto* g : {ga, gd, gm}) {
    g->add_option("-o,--output", out_file, "output .npy file")->required();
    g->add_option("--seed", g_seed, "random seed")->capture_default_str();
  }

  std::vector<std::string> info_files;
  std::string info_format = "text";
  auto* info = app.add_subcommand("info", "the CUDA device (name, SMs, L2, memory, versions, copy bandwidth), "
                                          "or the dtype and shape of .npy files");
  info->add_option("files", info_files, ".npy files to describe");
  info->add_option("--format", info_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string var_op, var_format = "text";
  auto* variants = app.add_subcommand("variants", "list every variant of every op, with its idea and limits");
  variants->add_option("op", var_op, "align, dedup or act-and-mul (default: all)");
  variants->add_option("--format", var_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kOk : kBadInput;
  }

  if (*align) return run_align(al, common);
  if (*dedup) return run_dedup(dd, common);
  if (*act) return run_act(ac, common);
  if (*info) return run_info(info_files, info_format);
  if (*variants) return run_variants(var_op, var_format);
  if (*gen) {
    npy::Array a;
    if (*ga) {
      a = gen::align_ids(g_tokens, g_topk, g_e, gen::parse_dist(dist), g_seed, id_dtype == "int64");
    } else if (*gd) {
      a = gen::dedup_indices(g_batch, g_m, g_k, g_max_index, g_overlap, g_pad, g_seed);
    } else {
      a = gen::act_input(g_tokens, g_d, *npy::parse_dtype(gdtype), g_seed);
    }
    outputs::write_file(out_file, a);
    std::string shape;
    for (auto s : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
    fmt::print("wrote {}: {} [{}]\n", out_file, npy::dtype_name(a.dtype), shape);
    return kOk;
  }
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const moekit::InputError& e) {
    fmt::print(stderr, "moekit: {}\n", e.what());
    return moekit::kBadInput;
  } catch (const moekit::CudaError& e) {
    fmt::print(stderr, "moekit: {}\n", e.what());
    return moekit::kCudaError;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "moekit: out of host memory\n");
    return moekit::kBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "moekit: {}\n", e.what());
    return moekit::kBadInput;
  }
}
