// The subcommands' argument structs and entry points (main.cpp wires them to CLI11).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver.hpp"

namespace moekit {

struct AlignArgs {
  std::string topk_ids;    // input file; empty = generate from the shape options
  std::string expert_map;  // optional
  std::int32_t num_experts = 0;
  std::int32_t block_size = 128;
  bool pad_sorted_ids = false;
  bool ignore_invalid = false;
  // synthetic input (no --topk-ids)
  std::int64_t tokens = -1;
  std::int32_t topk = 8;
  std::string dist = "uniform";
};
int run_align(const AlignArgs& a, const CommonOpts& c);

struct DedupArgs {
  std::string indices;
  std::int32_t mtp_step = 0;
  std::int64_t max_index = -1;
  // synthetic input (no --indices)
  std::int32_t batch = -1;
  std::int32_t k = 2048;
  double overlap = 0.8;
};
int run_dedup(const DedupArgs& a, const CommonOpts& c);

struct ActArgs {
  std::string input;
  std::string activation = "silu";
  std::string dtype;  // reinterpret 2-byte input as this dtype (bf16)
  // synthetic input (no --input)
  std::int64_t tokens = -1;
  std::int64_t d = 4096;
  std::string gen_dtype = "bf16";
};
int run_act(const ActArgs& a, const CommonOpts& c);

int run_info(const std::vector<std::string>& files, const std::string& format);
int run_variants(const std::string& op, const std::string& format);

}  // namespace moekit
