#include "dedup/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"

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
  require_host_memory(4.0 * double(batch) * mtp_step * k, "this dedup input");
  // Each (batch, step) row draws from its own counter-based stream (see Rng).
  const std::uint64_t key = stream_key(seed, 2);
  const bool distinct = max_index >= 2 * std::int64_t(k);  // rejection stays cheap
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {std::int64_t(batch) * mtp_step, k};
  a.data.resize(static_cast<std::size_t>(batch) * mtp_step * k * 4);
  const auto out = a.as<std::int32_t>();
  std::vector<std::int32_t> prev(k), row(k), carry(k);
  SmallSet seen(distinct ? static_cast<std::size_t>(k) : 0);
  const int keep = static_cast<int>(std::lround(overlap * k));
  const int pads = static_cast<int>(std::lround(pad * k));
  for (std::int32_t b = 0; b < batch; ++b) {
    for (std::int32_t m = 0; m < mtp_step; ++m) {
      const std::size_t r = static_cast<std::size_t>(b) * mtp_step + m;
      Rng rng{counter_at(key, r)};
      int n = 0;
      if (m > 0 && keep > 0) {  // carry over a random subset of the previous step's values
        carry = prev;
        // Fisher-Yates, only as far as needed.
        IndexStream idx{rng};
        for (int i = 0; i < k && n < keep; ++i) {
          std::swap(carry[i], carry[i + idx.below(static_cast<std::uint64_t>(k - i))]);
          if (carry[i] < 0) continue;
          if (distinct && !seen.insert(carry[i])) continue;
          row[n++] = carry[i];
        }
      }
      while (n < k) {
        const auto x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(max_index)));
        if (distinct && !seen.insert(x)) continue;
        row[n++] = x;
      }
      seen.clear();
      shuffle(row.data(), row.size(), rng);
      std::int32_t* o = out.data() + r * k;
      std::copy(row.begin(), row.end(), o);
      for (int i = k - pads; i < k; ++i) o[i] = -1;
      std::swap(prev, row);  // the next step carries from the unpadded row
    }
  }
  return a;
}

}  // namespace moekit::gen
