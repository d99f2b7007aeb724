#include "dedup/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "gen_common.hpp"

namespace moekit::gen {

npy::Array dedup_indices(std::int32_t batch, std::int32_t mtp_step, std::int32_t k,
                         std::int64_t max_index, double overlap, double pad, std::uint64_t seed) {
  if (batch < 0) throw InputError("--batch must be >= 0");
  if (mtp_step < 1) throw InputError("--mtp-step must be >= 1");
  if (k < 1) throw InputError("--k must be >= 1");
  if (max_index < 1 || max_index > (std::int64_t(1) << 31))
    throw InputError("--max-index must be in [1, 2^31]");
  if (!(overlap >= 0 && overlap <= 1)) throw InputError("--overlap must be in [0, 1]");
  if (!(pad >= 0 && pad <= 1)) throw InputError("--pad must be in [0, 1]");
  // A batch row (M*k values) is indexed in int32 by every dedup variant.
  check_size(double(mtp_step) * k, "a dedup batch (M*k values)", kInt32Max);
  check_size(double(batch) * mtp_step * k, "dedup input");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> val(0, max_index - 1);
  const bool distinct = max_index >= 2 * std::int64_t(k);  // rejection stays cheap
  std::vector<std::int32_t> v(static_cast<std::size_t>(batch) * mtp_step * k);
  std::vector<std::int32_t> prev(k), row(k);
  std::unordered_set<std::int32_t> seen;
  const int keep = static_cast<int>(std::lround(overlap * k));
  const int pads = static_cast<int>(std::lround(pad * k));
  for (std::int32_t b = 0; b < batch; ++b) {
    for (std::int32_t m = 0; m < mtp_step; ++m) {
      seen.clear();
      int n = 0;
      if (m > 0 && keep > 0) {  // carry over a random subset of the previous step's values
        std::vector<std::int32_t> carry(prev.begin(), prev.end());
        std::shuffle(carry.begin(), carry.end(), rng);
        for (int i = 0; i < k && n < keep; ++i) {
          if (carry[i] < 0) continue;
          if (distinct && !seen.insert(carry[i]).second) continue;
          row[n++] = carry[i];
        }
      }
      while (n < k) {
        auto x = static_cast<std::int32_t>(val(rng));
        if (distinct && !seen.insert(x).second) continue;
        row[n++] = x;
      }
      std::shuffle(row.begin(), row.end(), rng);
      prev = row;
      for (int i = k - pads; i < k; ++i) row[i] = -1;
      std::copy(row.begin(), row.end(), v.begin() + (static_cast<std::size_t>(b) * mtp_step + m) * k);
    }
  }
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {std::int64_t(batch) * mtp_step, k};
  a.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

}  // namespace moekit::gen
