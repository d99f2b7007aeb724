// Synthetic speculative top-k rows (`moekit gen dedup`, `moekit dedup --batch ...`).
#pragma once

#include <cstdint>

#include "npy.hpp"

namespace moekit::gen {

// [batch*mtp_step, k] int32. Row r+1 of a batch keeps a fraction `overlap` of
// row r's values (like consecutive speculative steps); values within a row are
// distinct when max_index >= k; a fraction `pad` of each row's tail is -1.
npy::Array dedup_indices(std::int32_t batch, std::int32_t mtp_step, std::int32_t k,
                         std::int64_t max_index, double overlap, double pad, std::uint64_t seed);

}  // namespace moekit::gen
