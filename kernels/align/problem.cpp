// align's problem planning (align.hpp): the derived sizes and the limits every
// variant shares. Host only.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "align/align.hpp"
#include "common/problem_error.hpp"

namespace moekit::align {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

Problem make_problem(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size, bool ids_int64,
                     std::int32_t map_size, bool pad_sorted_ids, Invalid invalid, MapSemantics map_semantics) {
  if (numel < 0) throw ProblemError("align: numel must be >= 0 (got " + str(numel) + ")");
  const bool bucket = invalid == Invalid::bucket;
  const std::int32_t max_e = kMaxExperts - (bucket ? 1 : 0);
  if (num_experts < 1 || num_experts > max_e)
    throw ProblemError("align: --num-experts must be in [1, " + str(max_e) + "]" +
                       (bucket ? " with --invalid bucket, whose bucket is one more" : "") + " (got " +
                       str(num_experts) + "): no variant takes more than " + str(kMaxExperts) + " experts");
  if (block_size < 1 || block_size > 1024)
    throw ProblemError("align: --block-size must be in [1, 1024] (got " + str(block_size) + ")");
  if (map_size < 0) throw ProblemError("align: expert map length must be >= 0 (got " + str(map_size) + ")");
  if (map_semantics == MapSemantics::vllm && map_size > 0 && map_size != num_experts)
    throw ProblemError("align: --map-semantics vllm needs one map entry per expert: the map has " + str(map_size) +
                       ", --num-experts is " + str(num_experts));

  // All arithmetic in int64: numel <= 2^63 and E*(B-1) < 2^41, no overflow here.
  // Every slot opens at most one group's blocks, so at most min(numel, groups)
  // groups pad: the tight bound, which is what vLLM and SGLang allocate
  // (numel * B when numel < groups). The padding fill costs bandwidth per row,
  // so the bound is what a decode call pays for.
  const std::int64_t groups = static_cast<std::int64_t>(num_experts) + (bucket ? 1 : 0);
  std::int64_t padded = numel + std::min(numel, groups) * (block_size - 1);
  if (pad_sorted_ids) padded = (padded + block_size - 1) / block_size * block_size;
  const std::int64_t blocks = (padded + block_size - 1) / block_size;
  // Kernels form block_index * B and cumsum + B in int32: require the whole
  // block-rounded range to fit, which also covers every slot index and the
  // padding value numel.
  if (blocks * block_size > kInt32Max)
    throw ProblemError("align: outputs do not fit int32: numel " + str(numel) + " + " +
                       (bucket ? "(E + the bucket)" : "E") + " " + str(groups) + " * (B " + str(block_size) +
                       " - 1) needs " + str(blocks * block_size) + " entries in sorted_token_ids (max " +
                       str(kInt32Max) + ")");

  Problem p;
  p.numel = numel;
  p.num_experts = num_experts;
  p.block_size = block_size;
  p.ids_int64 = ids_int64;
  p.map_size = map_size;
  p.max_num_tokens_padded = padded;
  p.max_num_blocks = blocks;
  p.invalid = invalid;
  p.map_semantics = map_semantics;
  return p;
}

}  // namespace moekit::align
